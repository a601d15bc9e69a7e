// Collectives without a ring or tree: all-to-all (direct pairwise exchange, n-1 rounds of latency),
// point-to-point, and parameter-server push/pull.
#include "collective_internal.h"

namespace hetplan::cost::detail {

Estimate all_to_all(const cluster::Cluster& c, const NetworkParams& p,
                    const std::vector<int>& devices, double bytes,
                    const std::vector<double>& shares) {
  const std::size_t n = devices.size();
  auto share = [&](std::size_t i) {
    return shares.empty() ? 1.0 / static_cast<double>(n) : shares[i];
  };
  std::vector<Hop> hops;
  hops.reserve(n * (n - 1));
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j)
      if (i != j) hops.push_back({devices[i], devices[j], share(i) * share(j) * bytes});
  Estimate e = phase(c, p, hops, static_cast<double>(n - 1));
  e.protocols = Protocols::send_recv;
  return e;
}

Estimate point_to_point(const cluster::Cluster& c, const NetworkParams& p, int src, int dst,
                        double bytes) {
  Estimate e = phase(c, p, {{src, dst, bytes}}, 1);
  e.protocols = Protocols::send_recv;
  return e;
}

// Push then pull; the two directions use different links (full duplex), so they overlap except for
// the server's own bottleneck; modelled as one phase of both with 2 latency steps.
Estimate parameter_server(const cluster::Cluster& c, const NetworkParams& p,
                          const std::vector<int>& devices, double bytes,
                          const std::vector<double>& shares) {
  std::vector<Hop> hops;
  if (shares.empty()) {
    const int server = devices.front();
    for (std::size_t w = 1; w < devices.size(); ++w) {
      hops.push_back({devices[w], server, bytes});
      hops.push_back({server, devices[w], bytes});
    }
  } else {
    for (std::size_t s = 0; s < devices.size(); ++s) {
      if (shares[s] <= 0) continue;
      for (std::size_t w = 0; w < devices.size(); ++w) {
        if (w == s) continue;
        hops.push_back({devices[w], devices[s], shares[s] * bytes});
        hops.push_back({devices[s], devices[w], shares[s] * bytes});
      }
    }
  }
  Estimate e = phase(c, p, hops, 2);
  e.protocols = Protocols::simple;
  return e;
}

}  // namespace hetplan::cost::detail
