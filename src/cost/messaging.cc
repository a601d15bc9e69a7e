#include "hetplan/cost/messaging.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace hetplan::cost {

std::optional<MessagingFit> fit_messaging(const std::vector<MessagingPoint>& points,
                                          const NetworkParams& params) {
  if (points.empty()) return std::nullopt;
  // Weighted least squares of t = a + b S with weights 1/t^2 (relative error).
  double sw = 0, sws = 0, swss = 0, swt = 0, swst = 0;
  for (const MessagingPoint& p : points) {
    const double w = 1.0 / (p.seconds * p.seconds);
    sw += w;
    sws += w * p.bytes;
    swss += w * p.bytes * p.bytes;
    swt += w * p.seconds;
    swst += w * p.bytes * p.seconds;
  }
  const double det = sw * swss - sws * sws;
  double a = swt / sw, b = 0;
  if (det > 1e-12 * sw * swss) {
    a = (swss * swt - sws * swst) / det;
    b = (sw * swst - sws * swt) / det;
  }
  const double launch = params.collective_launch.value;
  double largest = 0;
  for (const MessagingPoint& p : points) largest = std::max(largest, p.bytes);
  if (b * largest <= 1e-9 * std::abs(a)) {  // no growth with size (to rounding): all latency
    b = 0;
    a = swt / sw;
  }
  if (a < launch) {  // all bandwidth beyond the launch: refit the slope through it
    a = launch;
    b = swss > 0 ? std::max(0.0, (swst - launch * sws) / swss) : 0.0;
  }
  MessagingFit fit;
  fit.latency = Seconds((a - launch) / 2);
  fit.bandwidth = BytesPerSecond(b > 0 ? 1 / b : std::numeric_limits<double>::infinity());
  return fit;
}

cluster::Cluster with_measured_messaging(cluster::Cluster c, const CalibrationProfile& profile,
                                         const NetworkParams& params) {
  std::map<int, MessagingFit> fits;  // by index into c.device_types
  for (std::size_t t = 0; t < c.device_types.size(); ++t) {
    auto it = profile.messaging.find(c.device_types[t].name);
    if (it == profile.messaging.end()) continue;
    if (auto fit = fit_messaging(it->second, params)) fits[static_cast<int>(t)] = *fit;
  }
  if (fits.empty()) return c;
  auto fit_of = [&](int vertex) -> const MessagingFit* {
    if (vertex >= c.num_devices()) return nullptr;
    auto it = fits.find(c.devices[vertex].type);
    return it == fits.end() ? nullptr : &it->second;
  };
  // The messaging software runs on the worker's CPU: at a node's cpu_share of a core it takes
  // 1/cpu_share as long, and copies at cpu_share of the measured rate.
  auto share_of = [&](int vertex) { return c.nodes[c.devices[vertex].node].cpu_share; };
  for (std::size_t l = 0; l < c.links.size(); ++l) {
    cluster::Link& link = c.links[l];
    const MessagingFit* from = fit_of(link.from);
    const MessagingFit* to = fit_of(link.to);
    if (!from && !to) continue;
    const double eff = link_efficiency(c, static_cast<int>(l), params);
    // Half the measured path's latency and its bandwidth at one worker's end of the link.
    auto end_latency = [&](const MessagingFit& fit, int vertex) {
      return fit.latency / (2.0 * share_of(vertex));
    };
    auto end_bandwidth = [&](const MessagingFit& fit, int vertex) {
      return std::isfinite(fit.bandwidth.value) ? fit.bandwidth.value * share_of(vertex) / eff
                                                : std::numeric_limits<double>::infinity();
    };
    if (from && to) {  // a direct link between two workers: the whole path, both ends
      link.latency = end_latency(*from, link.from) + end_latency(*to, link.to);
      link.bandwidth = BytesPerSecond(std::min(
          {link.bandwidth.value, end_bandwidth(*from, link.from), end_bandwidth(*to, link.to)}));
      continue;
    }
    const int worker = from ? link.from : link.to;
    const MessagingFit& fit = from ? *from : *to;
    const int other = from ? link.to : link.from;
    const double measured = end_bandwidth(fit, worker);
    if (c.vertices[other].kind == cluster::VertexKind::node_switch) {
      link.latency = end_latency(fit, worker);
      if (std::isfinite(measured)) link.bandwidth = BytesPerSecond(measured);
    } else {
      link.latency = link.latency + end_latency(fit, worker);
      link.bandwidth = BytesPerSecond(std::min(link.bandwidth.value, measured));
    }
  }
  return c;
}

}  // namespace hetplan::cost
