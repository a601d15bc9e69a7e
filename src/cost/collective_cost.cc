// Entry point of the collective cost model: picks the algorithm (and the form for uneven shards)
// and turns its estimate into a CollectiveCost.
#include "hetplan/cost/collective_cost.h"

#include <algorithm>
#include <cassert>
#include <utility>

#include "collective_internal.h"

namespace hetplan::cost {

const char* to_string(Collective c) {
  switch (c) {
    case Collective::all_reduce:
      return "all_reduce";
    case Collective::reduce_scatter:
      return "reduce_scatter";
    case Collective::all_gather:
      return "all_gather";
    case Collective::all_to_all:
      return "all_to_all";
    case Collective::broadcast:
      return "broadcast";
    case Collective::p2p:
      return "p2p";
    case Collective::ps_push_pull:
      return "ps_push_pull";
  }
  return "?";
}

const char* to_string(Algorithm a) {
  switch (a) {
    case Algorithm::automatic:
      return "automatic";
    case Algorithm::ring:
      return "ring";
    case Algorithm::tree:
      return "tree";
    case Algorithm::hierarchical:
      return "hierarchical";
    case Algorithm::direct:
      return "direct";
    case Algorithm::parameter_server:
      return "parameter_server";
  }
  return "?";
}

const char* to_string(Protocol p) {
  switch (p) {
    case Protocol::simple:
      return "simple";
    case Protocol::ll128:
      return "ll128";
    case Protocol::ll:
      return "ll";
  }
  return "?";
}

const char* to_string(UnevenForm f) {
  switch (f) {
    case UnevenForm::padded:
      return "padded";
    case UnevenForm::grouped:
      return "grouped";
  }
  return "?";
}

// Defaults, from ../shared/reference/hardware.md: a published analytical model that matches
// measured Megatron runs within a few percent uses 65% of NVLink bandwidth and 90% of InfiniBand
// bandwidth for collectives (NCCL bus bandwidth in a DGX A100 is 230 to 260 of 300 GB/s; IB reaches
// 90 to 95%). Launch: NVLink/NVSwitch and InfiniBand cost a few microseconds per step; an NCCL call
// adds about 5 us of software overhead. Tuned once, globally, here. Protocols by message size, as
// NCCL chooses them.
NetworkParams NetworkParams::defaults() {
  NetworkParams p;
  p.intra_node_efficiency = 0.65;
  p.inter_node_efficiency = 0.90;
  p.collective_launch = Seconds(5e-6);
  p.protocols = true;
  return p;
}

namespace detail {

// LL128 and LL against Simple, from NCCL's tuning model (NVIDIA/nccl src/graph/tuning.cc at
// 5067397c, its default tuner constants for rings over NVLink): per step 1.9 and 0.6 us against
// Simple's 3.4; fixed 14.0 and 6.6 us against 8.4; bus bandwidth 0.92 (120 of 128 bytes) and 0.5
// (4 of 8) of Simple's. Send and receive run LL for small messages and Simple otherwise.
std::pair<ProtocolShares, Seconds> fastest_protocol(const Estimate& e, const NetworkParams& p) {
  static constexpr ProtocolShares kShares[] = {
      {Protocol::simple, 1.0, 1.0, 1.0},
      {Protocol::ll128, 0.92, 1.9 / 3.4, 14.0 / 8.4},
      {Protocol::ll, 0.5, 0.6 / 3.4, 6.6 / 8.4},
  };
  const double launch = p.collective_launch.value * static_cast<double>(e.launches);
  auto time = [&](const ProtocolShares& s) {
    return e.bandwidth_time.value / s.bandwidth + e.latency.value * s.hop + launch * s.launch;
  };
  std::pair<ProtocolShares, Seconds> best{kShares[0], Seconds(time(kShares[0]))};
  if (!p.protocols || e.protocols == Protocols::simple) return best;
  for (const ProtocolShares& s : kShares) {
    if (s.protocol == Protocol::ll128 && e.protocols == Protocols::send_recv) continue;
    if (time(s) < best.second.value) best = {s, Seconds(time(s))};
  }
  return best;
}

}  // namespace detail

namespace {

using detail::Estimate;

struct Candidate {
  Algorithm algorithm;
  UnevenForm form = UnevenForm::padded;
  Estimate estimate;
};

CollectiveCost finish(Candidate c, const NetworkParams& p) {
  const auto [shares, time] = detail::fastest_protocol(c.estimate, p);
  CollectiveCost out;
  out.time = time;
  out.latency = c.estimate.latency * shares.hop +
                p.collective_launch * (static_cast<double>(c.estimate.launches) * shares.launch);
  out.algorithm = c.algorithm;
  out.uneven_form = c.form;
  out.protocol = shares.protocol;
  out.loads = std::move(c.estimate.loads);
  for (LinkLoad& l : out.loads) l.bytes /= shares.bandwidth;  // the flags ride along
  return out;
}

// The requested candidate when present, else the cheapest (the first on ties).
CollectiveCost pick(std::vector<Candidate> cands, Algorithm requested, const NetworkParams& p) {
  assert(!cands.empty());
  for (Candidate& c : cands)
    if (c.algorithm == requested) return finish(std::move(c), p);
  std::size_t best = 0;
  Seconds best_time = detail::fastest_protocol(cands[0].estimate, p).second;
  for (std::size_t i = 1; i < cands.size(); ++i)
    if (const Seconds t = detail::fastest_protocol(cands[i].estimate, p).second; t < best_time) {
      best = i;
      best_time = t;
    }
  return finish(std::move(cands[best]), p);
}

bool uneven(const std::vector<double>& shares) {
  if (shares.empty()) return false;
  const auto [lo, hi] = std::minmax_element(shares.begin(), shares.end());
  return *hi - *lo > 1e-12 * std::max(1.0, *hi);
}

Algorithm default_algorithm(Collective k) {
  switch (k) {
    case Collective::all_to_all:
    case Collective::p2p:
      return Algorithm::direct;
    case Collective::ps_push_pull:
      return Algorithm::parameter_server;
    default:
      return Algorithm::ring;
  }
}

}  // namespace

CollectiveCost collective_cost(const cluster::Cluster& c, const CollectiveRequest& req,
                               const NetworkParams& network) {
  const std::size_t n = req.devices.size();
  assert(req.shares.empty() || req.shares.size() == n);
  for ([[maybe_unused]] int d : req.devices) assert(d >= 0 && d < c.num_devices());
  // CPU workers' collectives (Gloo) move whole buffers: NCCL's protocols are a GPU's.
  NetworkParams params = network;
  for (int d : req.devices)
    if (c.type_of(d).architecture == cluster::Architecture::cpu) params.protocols = false;
  const double bytes = req.bytes.value;
  if (n < 2 || bytes <= 0) {
    CollectiveCost zero;
    zero.algorithm =
        req.algorithm == Algorithm::automatic ? default_algorithm(req.kind) : req.algorithm;
    return zero;
  }
  const auto& dev = req.devices;
  switch (req.kind) {
    case Collective::all_reduce: {
      if (req.algorithm == Algorithm::parameter_server)
        return finish({Algorithm::parameter_server, UnevenForm::padded,
                       detail::parameter_server(c, params, dev, bytes, {})},
                      params);
      std::vector<Candidate> cands;
      cands.push_back(
          {Algorithm::ring, UnevenForm::padded, detail::ring_all_reduce(c, params, dev, bytes)});
      cands.push_back(
          {Algorithm::tree, UnevenForm::padded, detail::tree_all_reduce(c, params, dev, bytes)});
      if (detail::hierarchical_applies(c, dev))
        cands.push_back({Algorithm::hierarchical, UnevenForm::padded,
                         detail::hierarchical_all_reduce(c, params, dev, bytes)});
      return pick(std::move(cands), req.algorithm, params);
    }
    case Collective::reduce_scatter:
    case Collective::all_gather: {
      const bool gather = req.kind == Collective::all_gather;
      std::vector<Candidate> cands;
      const bool want_padded = !req.uneven_form || *req.uneven_form == UnevenForm::padded;
      const bool want_grouped =
          uneven(req.shares) && (!req.uneven_form || *req.uneven_form == UnevenForm::grouped);
      if (want_padded || !want_grouped)
        cands.push_back({Algorithm::ring, UnevenForm::padded,
                         detail::ring_shard_collective(c, params, dev, bytes, req.shares)});
      if (want_grouped)
        cands.push_back(
            {Algorithm::ring, UnevenForm::grouped,
             detail::grouped_shard_collective(c, params, dev, bytes, req.shares, gather)});
      return pick(std::move(cands), Algorithm::automatic, params);
    }
    case Collective::broadcast: {
      std::vector<Candidate> cands;
      cands.push_back(
          {Algorithm::ring, UnevenForm::padded, detail::chain_broadcast(c, params, dev, bytes)});
      cands.push_back(
          {Algorithm::tree, UnevenForm::padded, detail::tree_broadcast(c, params, dev, bytes)});
      return pick(std::move(cands), req.algorithm, params);
    }
    case Collective::all_to_all:
      return finish({Algorithm::direct, UnevenForm::padded,
                     detail::all_to_all(c, params, dev, bytes, req.shares)},
                    params);
    case Collective::p2p:
      assert(n == 2);
      return finish({Algorithm::direct, UnevenForm::padded,
                     detail::point_to_point(c, params, dev[0], dev[1], bytes)},
                    params);
    case Collective::ps_push_pull:
      return finish({Algorithm::parameter_server, UnevenForm::padded,
                     detail::parameter_server(c, params, dev, bytes, req.shares)},
                    params);
  }
  return {};
}

}  // namespace hetplan::cost
