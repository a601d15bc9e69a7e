#include "hetplan/sim/simulate.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <tuple>

#include "hetplan/sim/grad_chunks.h"
#include "hetplan/sim/grad_sync.h"
#include "hetplan/sim/gradient_buckets.h"
#include "hetplan/sim/layer_costs.h"
#include "hetplan/sim/schedule_order.h"
#include "lowering_common.h"
#include "op_level.h"
#include "stage_costs.h"
#include "task_graph.h"
#include "unrolled_iterations.h"

namespace hetplan::sim {

const char* to_string(TaskKind k) {
  switch (k) {
    case TaskKind::forward:
      return "forward";
    case TaskKind::backward:
      return "backward";
    case TaskKind::optimizer:
      return "optimizer";
    case TaskKind::p2p:
      return "p2p";
    case TaskKind::grad_sync:
      return "grad_sync";
    case TaskKind::param_gather:
      return "param_gather";
    case TaskKind::grad_rebuild:
      return "grad_rebuild";
    case TaskKind::tp_comm:
      return "tp_comm";
    case TaskKind::recompute:
      return "recompute";
  }
  return "?";
}

bool is_transfer(TaskKind k) {
  return k == TaskKind::p2p || k == TaskKind::grad_sync || k == TaskKind::param_gather ||
         k == TaskKind::tp_comm;
}

namespace {

using detail::Task;
using detail::TaskGraph;

// Fraction of replica a's batch interval that overlaps replica b's (intervals are laid out in
// replica order over [0, 1)).
std::vector<std::vector<double>> batch_overlap(const plan::Stage& a, const plan::Stage& b) {
  std::vector<std::vector<double>> out(a.replicas.size(),
                                       std::vector<double>(b.replicas.size(), 0.0));
  double a0 = 0;
  for (std::size_t i = 0; i < a.replicas.size(); ++i) {
    const double a1 = a0 + a.replicas[i].batch_share;
    double b0 = 0;
    for (std::size_t j = 0; j < b.replicas.size(); ++j) {
      const double b1 = b0 + b.replicas[j].batch_share;
      out[i][j] = std::max(0.0, std::min(a1, b1) - std::max(a0, b0));
      b0 = b1;
    }
    a0 = a1;
  }
  return out;
}

// Whether some device the plan uses is on a node with a cpu_share below one.
bool uses_cpu_quota(const cluster::Cluster& c, const plan::Plan& p) {
  for (const auto& st : p.stages)
    for (const auto& r : st.replicas)
      for (int d : r.devices)
        if (c.nodes[c.devices[d].node].cpu_share < 1) return true;
  return false;
}

struct Lowering {
  const model::Model& m;
  const cluster::Cluster& c;
  const plan::Plan& p;
  const SimOptions& opts;
  cost::ComputeCostModel compute;
  detail::StageCoster coster;
  TaskGraph g;
  std::vector<LaneInfo> lanes;
  std::vector<std::vector<int>> lane_of;  // [stage][replica]
  std::vector<int> lane_compute_stream;
  std::vector<int> lane_quota;  // index into g.quotas, or -1
  // Per task: for a transfer, the lanes of the devices at its links' ends (ascending), whose
  // quotas it spends and whose communication it is; empty for compute.
  detail::TransferLanes transfer_lanes;
  // Under CPU quotas, the costs with every device slowed by its cpu_share (for lane_share).
  std::optional<detail::StageCoster> slowed_coster;
  std::vector<std::vector<PassRef>> lane_order;
  // Task ids, [stage][replica][microbatch]: the first task of each pass (its compute) and the last
  // (its tensor-parallel collectives, or the compute when it has none).
  std::vector<std::vector<std::vector<int>>> fwd, bwd, fwd_last, bwd_last;
  std::vector<std::vector<std::vector<int>>>
      bwd_buckets;  // last micro-batch's backward compute, per bucket
  std::vector<std::vector<detail::LayerTimes>> times;  // [stage][replica]
  std::vector<std::vector<std::pair<int, int>>>
      buckets;  // [stage] -> (first layer offset, count), in backward order
  std::vector<std::vector<int>> optimizer_task;  // [stage][replica]
  std::vector<std::vector<int>> stage_syncs;     // [stage]: its gradient syncs over replicas
  // DLCP's chunked transport (chunked()): the first micro-batch's forward compute per layer,
  // [stage][replica][layer offset], each starting with that layer's optimizer update; the edges
  // from this iteration's chunks to the next one's forward passes; and per task, the share of the
  // whole model's squared gradient norm a chunk carries (0 for other tasks).
  std::vector<std::vector<std::vector<int>>> fwd_layers;
  std::vector<detail::NextIterationEdge> next_edges;
  std::vector<double> chunk_norm;

  Lowering(const model::Model& m_, const cluster::Cluster& c_, const plan::Plan& p_,
           const SimOptions& o)
      : m(m_),
        c(c_),
        p(p_),
        opts(o),
        compute(o.compute, o.profile),
        coster(m_, c_, p_, compute, o.network, !uses_cpu_quota(c_, p_)) {
    g.stop = detail::StopPoll(opts.stop);
  }

  bool chunked() const { return p.grad_priority != plan::GradPriority::none; }

  double samples(const plan::Replica& r) const {
    return r.batch_share * static_cast<double>(p.global_batch) / p.num_microbatches;
  }

  double layer_params(int li) const { return static_cast<double>(m.layer_parameters(li)); }
  // Bytes of a weight or its gradient as they travel: the model's dtype (2 for bf16 and fp16).
  double param_bytes() const { return model::dtype_bytes(m.dtype); }

  Result<bool> build_lanes() {
    std::map<std::vector<int>, int> by_devices;
    lane_of.resize(p.stages.size());
    for (std::size_t s = 0; s < p.stages.size(); ++s)
      for (const auto& r : p.stages[s].replicas) {
        std::vector<int> key = r.devices;
        std::sort(key.begin(), key.end());
        auto [it, inserted] = by_devices.emplace(key, static_cast<int>(lanes.size()));
        if (inserted)
          lanes.push_back(
              LaneInfo{r.devices, {}, detail::lane_name(static_cast<int>(lanes.size()), key)});
        lanes[it->second].stages.push_back(static_cast<int>(s));
        lane_of[s].push_back(it->second);
      }
    return true;
  }

  // Position and pipeline size of a lane: lanes holding several chunks must hold stages
  // first, first + P, first + 2P, ... (the interleaved layout).
  Result<std::pair<int, int>> lane_position(const LaneInfo& lane) const {
    const int S = static_cast<int>(p.stages.size());
    const int v = static_cast<int>(lane.stages.size());
    if (v == 1) return std::make_pair(lane.stages[0], S);
    if (S % v != 0)
      return Error{fmt::format(
          "plan: stages: {} holds {} stages, which does not divide the {} stages evenly "
          "(expected an interleaved layout)",
          lane.name, v, S)};
    const int P = S / v;
    for (int i = 0; i < v; ++i)
      if (lane.stages[i] != lane.stages[0] + i * P)
        return Error{fmt::format(
            "plan: stages: {} holds stages that are not {} apart (expected an interleaved "
            "layout)",
            lane.name, P)};
    if (p.schedule == plan::Schedule::interleaved && p.num_microbatches % P != 0)
      return Error{
          fmt::format("plan: num_microbatches: expected a multiple of the pipeline size {} for the "
                      "interleaved schedule, got {}",
                      P, p.num_microbatches)};
    return std::make_pair(lane.stages[0], P);
  }

  void build_buckets() {
    buckets.resize(p.stages.size());
    for (std::size_t s = 0; s < p.stages.size(); ++s) {
      const auto& st = p.stages[s];
      const int tp = static_cast<int>(st.replicas[0].devices.size());
      std::vector<double> bytes;
      for (int off = 0; off < st.num_layers; ++off)
        bytes.push_back(layer_params(st.first_layer + off) * param_bytes() / tp);
      // Chunked, every layer's gradient is its own: its chunks queue as soon as its backward
      // pass ends.
      buckets[s] = gradient_buckets(bytes, chunked() ? 0.0 : p.grad_bucket_bytes);
    }
  }

  Result<bool> build() {
    auto ok = build_lanes();
    if (!ok) return ok;
    const int S = static_cast<int>(p.stages.size());
    const int M = p.num_microbatches;
    times.resize(S);
    // A single-device replica's times depend on its device's speed and its samples alone (its one
    // collective, synced batch normalisation's, is its stage's): replicas alike in both share them.
    std::map<std::tuple<int, int, double, double>, std::size_t> alike;  // (s, type, cpu, samples)
    for (int s = 0; s < S; ++s)
      for (const auto& r : p.stages[s].replicas) {
        if (r.devices.size() == 1) {
          const auto& device = c.devices[r.devices[0]];
          auto [it, fresh] = alike.try_emplace(
              std::make_tuple(s, device.type, c.nodes[device.node].cpu_share, samples(r)),
              times[s].size());
          if (!fresh) {
            times[s].push_back(times[s][it->second]);
            continue;
          }
        }
        times[s].push_back(coster.replica_times(p.stages[s], r, samples(r)));
      }
    build_buckets();
    // Compute streams and pass orders.
    lane_order.resize(lanes.size());
    for (std::size_t l = 0; l < lanes.size(); ++l) {
      auto pos = lane_position(lanes[l]);
      if (!pos) return pos.error();
      lane_order[l] = pass_order(p.schedule, static_cast<int>(lanes[l].stages.size()), pos->first,
                                 pos->second, M);
      const double share = lane_share(static_cast<int>(l));
      int quota = -1;
      // A CPU worker without a cpu_share shares the host's cores too, where they are given.
      const bool unthrottled_cpu = share >= 1 && opts.host_cores > 0 && cpu_lane(lanes[l]);
      if (share < 1 || unthrottled_cpu) {
        quota = static_cast<int>(g.quotas.size());
        g.quotas.push_back(detail::CpuQuota{share, cluster::kCpuQuotaPeriod.value,
                                            static_cast<int>(lanes[l].devices.size()),
                                            unthrottled_cpu});
        g.host_cores = opts.host_cores;
      }
      lane_quota.push_back(quota);
      lane_compute_stream.push_back(g.add_stream(quota));
    }
    // Room for each pass's tasks (up to 4 under overlapped collectives) and the transfers
    // between them, so that the graph is not moved as it grows.
    std::size_t num_passes = 0;
    for (const auto& order : lane_order) num_passes += order.size();
    g.tasks.reserve(num_passes * (plan::overlaps_tp(p.overlap) ? 6 : 4));
    g.edges.reserve(num_passes * (plan::overlaps_tp(p.overlap) ? 8 : 5));
    fwd.assign(S, {});
    bwd.assign(S, {});
    fwd_last.assign(S, {});
    bwd_last.assign(S, {});
    bwd_buckets.assign(S, {});
    optimizer_task.assign(S, {});
    stage_syncs.assign(S, {});
    fwd_layers.assign(S, {});
    for (int s = 0; s < S; ++s) {
      const std::size_t R = p.stages[s].replicas.size();
      fwd[s].assign(R, std::vector<int>(M, -1));
      bwd[s].assign(R, std::vector<int>(M, -1));
      fwd_last[s].assign(R, std::vector<int>(M, -1));
      bwd_last[s].assign(R, std::vector<int>(M, -1));
      bwd_buckets[s].assign(R, {});
      fwd_layers[s].assign(R, {});
    }
    // Replica index of each stage on each lane.
    std::vector<std::map<int, int>> replica_on_lane(lanes.size());
    for (int s = 0; s < S; ++s)
      for (std::size_t r = 0; r < lane_of[s].size(); ++r)
        replica_on_lane[lane_of[s][r]][s] = static_cast<int>(r);
    for (std::size_t l = 0; l < lanes.size(); ++l) {
      for (const PassRef& pr : lane_order[l]) {
        const int s = lanes[l].stages[pr.chunk];
        const int r = replica_on_lane[l][s];
        const auto& t = times[s][r];
        const int layers = p.stages[s].num_layers;
        Task task;
        task.stream = lane_compute_stream[l];
        task.lane = static_cast<int>(l);
        task.stage = s;
        task.microbatch = pr.microbatch;
        const int mb = pr.microbatch;
        if (pr.forward && chunked() && mb == 0) {
          // Layer by layer, each applying its own update first, so that it can start as soon as
          // the last iteration's chunks of that layer are in (unrolled_iterations.h).
          task.kind = TaskKind::forward;
          const double params = stage_params(s);
          for (int off = 0; off < layers; ++off) {
            const auto [first, last] = add_pass(task, t, r, true, off, 1);
            if (params > 0)
              g.tasks[first].duration +=
                  t.optimizer * layer_params(p.stages[s].first_layer + off) / params;
            if (off == 0) fwd[s][r][mb] = first;
            fwd_last[s][r][mb] = last;
            fwd_layers[s][r].push_back(first);
          }
        } else if (pr.forward) {
          task.kind = TaskKind::forward;
          std::tie(fwd[s][r][mb], fwd_last[s][r][mb]) = add_pass(task, t, r, true, 0, layers);
        } else if (mb != M - 1) {
          task.kind = TaskKind::backward;
          std::tie(bwd[s][r][mb], bwd_last[s][r][mb]) = add_pass(task, t, r, false, 0, layers);
        } else {
          // The last backward pass, split by gradient bucket so synchronisation overlaps it.
          task.kind = TaskKind::backward;
          for (std::size_t b = 0; b < buckets[s].size(); ++b) {
            auto [off, count] = buckets[s][b];
            task.bucket = static_cast<int>(b);
            const auto [first, last] = add_pass(task, t, r, false, off, count);
            if (b == 0) bwd[s][r][mb] = first;
            bwd_last[s][r][mb] = last;
            bwd_buckets[s][r].push_back(first);
          }
        }
      }
    }
    // Within a micro-batch, the backward pass needs its own forward (same lane: implied by order,
    // but explicit edges keep odd schedules honest).
    for (int s = 0; s < S; ++s)
      for (std::size_t r = 0; r < p.stages[s].replicas.size(); ++r)
        for (int mb = 0; mb < M; ++mb) g.add_edge(fwd_last[s][r][mb], bwd[s][r][mb]);
    add_pipeline_transfers();
    if (p.zero_stage >= 3) add_parameter_gathers();
    auto sync = add_gradient_sync();
    if (!sync) return sync;
    find_transfer_lanes();
    attach_transfer_quotas();
    return true;
  }

  // Whether every device of the lane is a CPU worker.
  bool cpu_lane(const LaneInfo& lane) const {
    return std::all_of(lane.devices.begin(), lane.devices.end(), [&](int d) {
      return c.type_of(d).architecture == cluster::Architecture::cpu;
    });
  }

  // The share of a core at which lane l computes, one quota for all its devices (they compute in
  // step): its passes' compute at full speed over their compute with each device at its node's
  // cpu_share. A lane that computes all the time then takes as long as with every device that
  // much slower; for devices of one share it is that share.
  double lane_share(int l) {
    double smallest = 1;
    for (int d : lanes[l].devices)
      smallest = std::min(smallest, c.nodes[c.devices[d].node].cpu_share);
    if (smallest >= 1) return 1;
    double full = 0, slowed = 0;
    if (!slowed_coster) slowed_coster.emplace(m, c, p, compute, opts.network, true);
    for (int s : lanes[l].stages)
      for (std::size_t r = 0; r < lane_of[s].size(); ++r) {
        if (lane_of[s][r] != l) continue;
        const auto& rep = p.stages[s].replicas[r];
        const auto t = slowed_coster->replica_times(p.stages[s], rep, samples(rep), false);
        const int n = p.stages[s].num_layers;
        auto busy = [n](const detail::LayerTimes& lt) {
          return lt.compute(true, 0, n) + lt.compute(false, 0, n) + lt.optimizer;
        };
        full += busy(times[s][r]);
        slowed += busy(t);
      }
    if (full <= 0 || slowed <= 0) return smallest;  // no compute
    return std::min(1.0, full / slowed);
  }

  void find_transfer_lanes() { transfer_lanes = detail::transfer_lanes(g, c, lanes); }

  // Each transfer spends the CPU quotas of the devices at its links' ends (lanes with a quota
  // have their own, so the quotas are as distinct and ordered as the lanes).
  void attach_transfer_quotas() {
    if (g.quotas.empty()) return;
    for (std::size_t t = 0; t < g.tasks.size(); ++t)
      for (int l : transfer_lanes[t])
        if (lane_quota[l] >= 0) g.add_quota(static_cast<int>(t), lane_quota[l]);
  }

  // A pass's compute over layers [off, off + count) of replica r of task.stage (times `lt`), then
  // on the same stream its tensor-parallel collectives as one flow (the compute stream waits for
  // them, as Megatron-LM's synchronous collectives make it). Under Plan::overlap tp the flow runs
  // on the lane's own stream from the pass's start, beside its compute, and the pass ends when
  // both have (Megatron-LM's --tp-comm-overlap pipelines each collective with the GEMM next to
  // it; taken as hiding a pass's collectives up to its compute time). Returns the first and the
  // last task. Every micro-batch's pass is alike: its times and its links' loads (read-only in
  // the engine) are worked out and stored once.
  std::pair<int, int> add_pass(Task task, const detail::LayerTimes& lt, int r, bool forward,
                               int off, int count) {
    auto [it, fresh] = passes.try_emplace(std::make_tuple(task.stage, r, forward, off, count));
    Pass& pass = it->second;
    if (fresh) {
      pass.compute = lt.compute(forward, off, count);
      pass.comm = lt.comm(forward, off, count);
      pass.loads_begin = static_cast<int>(g.loads.size());
      g.loads.insert(g.loads.end(), pass.comm.loads.begin(), pass.comm.loads.end());
      pass.loads_end = static_cast<int>(g.loads.size());
    }
    task.duration = pass.compute;
    if (pass.comm.empty()) {
      const int only = g.add_task(task);
      return {only, only};
    }
    Task t = task;
    t.kind = TaskKind::tp_comm;
    t.is_transfer = true;
    t.duration = pass.comm.transfer;
    t.latency = pass.comm.latency;
    t.loads_begin = pass.loads_begin;
    t.loads_end = pass.loads_end;
    if (plan::overlaps_tp(p.overlap)) {
      // start (no time) -> compute, and start -> the flow on the lane's collective stream; the
      // pass's end (no time) waits for both.
      Task mark = task;
      mark.duration = 0;
      const int start = g.add_task(mark);
      g.add_task(task);
      auto [it_stream, fresh_stream] = tp_stream.try_emplace(task.lane, 0);
      if (fresh_stream) it_stream->second = g.add_stream();
      t.stream = it_stream->second;
      const int flow = g.add_task(t);
      g.add_edge(start, flow);
      const int end = g.add_task(mark);
      g.add_edge(flow, end);
      return {start, end};
    }
    const int first = g.add_task(task);
    return {first, g.add_task(t)};
  }
  std::map<int, int> tp_stream;  // lane -> the stream of its overlapped collectives
  struct Pass {
    double compute = 0;
    detail::PassComm comm;
    int loads_begin = 0, loads_end = 0;
  };
  std::map<std::tuple<int, int, bool, int, int>, Pass> passes;  // (stage, replica, fwd, layers)

  // A transfer of `parts` run together (its loads appended to the graph's), not yet in any stream.
  Task make_transfer(TaskKind kind, int stream, int lane, int peer, int stage, int mb, int bucket,
                     const std::vector<cost::CollectiveCost>& parts) {
    Task t;
    t.kind = kind;
    t.is_transfer = true;
    t.stream = stream;
    t.lane = lane;
    t.peer_lane = peer;
    t.stage = stage;
    t.microbatch = mb;
    t.bucket = bucket;
    t.loads_begin = static_cast<int>(g.loads.size());
    for (const auto& part : parts) {
      t.latency = std::max(t.latency, part.latency.value);
      t.duration = std::max(t.duration, (part.time - part.latency).value);
      g.loads.insert(g.loads.end(), part.loads.begin(), part.loads.end());
    }
    t.loads_end = static_cast<int>(g.loads.size());
    return t;
  }

  int add_transfer(TaskKind kind, int stream, int lane, int peer, int stage, int mb, int bucket,
                   const std::vector<cost::CollectiveCost>& parts) {
    return g.add_task(make_transfer(kind, stream, lane, peer, stage, mb, bucket, parts));
  }

  // Activation bytes per sample crossing the boundary after stage s: what its last op writes.
  double boundary_bytes(int s) const {
    const auto& st = p.stages[s];
    return m.layer_output_bytes(st.first_layer + st.num_layers - 1);
  }

  // Megatron-LM's scatter/gather: the tensor-parallel ranks each send 1/k of the activation
  // over their own links.
  std::vector<cost::CollectiveCost> p2p_parts(const plan::Replica& a, const plan::Replica& b,
                                              double bytes) {
    const std::size_t k = std::min(a.devices.size(), b.devices.size());
    std::vector<cost::CollectiveCost> parts;
    for (std::size_t j = 0; j < k; ++j)
      parts.push_back(
          coster.collective(cost::Collective::p2p, {a.devices[j], b.devices[j]}, bytes / k, {}));
    return parts;
  }

  void add_pipeline_transfers() {
    const int S = static_cast<int>(p.stages.size());
    const int M = p.num_microbatches;
    for (int s = 0; s + 1 < S; ++s) {
      const auto overlap = batch_overlap(p.stages[s], p.stages[s + 1]);
      const double per_sample = boundary_bytes(s);
      for (std::size_t a = 0; a < overlap.size(); ++a)
        for (std::size_t b = 0; b < overlap[a].size(); ++b) {
          if (overlap[a][b] <= 0) continue;
          const int la = lane_of[s][a], lb = lane_of[s + 1][b];
          if (la == lb) {
            for (int mb = 0; mb < M; ++mb) {
              g.add_edge(fwd_last[s][a][mb], fwd[s + 1][b][mb]);
              g.add_edge(bwd_end(s + 1, b, mb), bwd[s][a][mb]);
            }
            continue;
          }
          const double bytes = per_sample * overlap[a][b] * static_cast<double>(p.global_batch) / M;
          // Every micro-batch's transfers are alike: their loads are appended once and shared.
          // The gradients going back are charged to the activations' links (from a to b).
          Task tf =
              make_transfer(TaskKind::p2p, g.add_stream(), la, lb, s, -1, -1,
                            p2p_parts(p.stages[s].replicas[a], p.stages[s + 1].replicas[b], bytes));
          Task tb = tf;
          tb.stream = g.add_stream();
          std::swap(tb.lane, tb.peer_lane);
          tb.stage = s + 1;
          for (int mb = 0; mb < M; ++mb) {
            tf.microbatch = tb.microbatch = mb;
            const int f = g.add_task(tf);
            g.add_edge(fwd_last[s][a][mb], f);
            g.add_edge(f, fwd[s + 1][b][mb]);
            const int bk = g.add_task(tb);
            g.add_edge(bwd_end(s + 1, b, mb), bk);
            g.add_edge(bk, bwd[s][a][mb]);
          }
        }
    }
  }

  double stage_params(int s) const {
    double params = 0;
    const auto& st = p.stages[s];
    for (int li = st.first_layer; li < st.first_layer + st.num_layers; ++li)
      params += layer_params(li);
    return params;
  }

  // ZeRO-3: each forward and backward pass first gathers the stage's parameter shards from the
  // data-parallel replicas, in the order the passes run, prefetching as far as the stream allows.
  void add_parameter_gathers() {
    for (std::size_t s = 0; s < p.stages.size(); ++s) {
      const auto& st = p.stages[s];
      if (st.replicas.size() < 2) continue;
      const int lane0 = lane_of[s][0];
      const auto& lane = lanes[lane0];
      const int chunk =
          static_cast<int>(std::find(lane.stages.begin(), lane.stages.end(), static_cast<int>(s)) -
                           lane.stages.begin());
      const auto parts =
          coster.sync_parts(st, stage_params(static_cast<int>(s)) * param_bytes(),
                            cost::Collective::all_gather, cost::Algorithm::automatic);
      // One gather per pass, alike: their loads are appended once and shared.
      Task gather = make_transfer(TaskKind::param_gather, g.add_stream(), lane0, -1,
                                  static_cast<int>(s), -1, -1, parts);
      for (const PassRef& pr : lane_order[lane0]) {
        if (pr.chunk != chunk) continue;
        gather.microbatch = pr.microbatch;
        const int t = g.add_task(gather);
        for (std::size_t r = 0; r < st.replicas.size(); ++r)
          g.add_edge(t, pr.forward ? fwd[s][r][pr.microbatch] : bwd[s][r][pr.microbatch]);
      }
    }
  }

  // The task that ends the backward pass of (stage, replica, micro-batch).
  int bwd_end(int s, std::size_t r, int mb) const { return bwd_last[s][r][mb]; }

  // Index into p.grad_sync of the rule that synchronises op i's gradient (its first match), or
  // -1 for the default (all-reduce, cheapest algorithm).
  std::vector<int> sync_rule;

  void find_sync_rules() {
    sync_rule.assign(m.ops.size(), -1);
    for (std::size_t op = 0; op < m.ops.size(); ++op)
      for (std::size_t i = 0; i < p.grad_sync.size() && sync_rule[op] < 0; ++i)
        if (plan::op_pattern_matches(p.grad_sync[i].ops, m.ops[op].name))
          sync_rule[op] = static_cast<int>(i);
  }

  plan::SyncMethod sync_method(int op) const {
    return sync_rule[op] < 0 ? plan::SyncMethod::all_reduce : p.grad_sync[sync_rule[op]].method;
  }

  // A bucket's parameters to synchronise, by (method, algorithm), and the ops whose gradients
  // travel as sufficient factors.
  struct BucketSync {
    std::map<std::tuple<plan::SyncMethod, cost::Algorithm, int>, double> params;
    std::vector<int> factor_ops;
    int factor_priority = std::numeric_limits<int>::min();  // the highest of the factor ops' rules
  };

  Result<BucketSync> bucket_sync(int s, int first, int count) const {
    const auto& st = p.stages[s];
    BucketSync out;
    for (int li = st.first_layer + first; li < st.first_layer + first + count; ++li) {
      const auto& L = m.layers[li];
      for (int op = L.first_op; op < L.first_op + L.num_ops; ++op) {
        if (m.ops[op].params == 0) continue;
        const plan::SyncMethod method = sync_method(op);
        if (method == plan::SyncMethod::none) continue;
        if (method == plan::SyncMethod::sufficient_factor) {
          if (!sufficient_factor_applies(m.ops[op], coster.split(op)))
            return Error{fmt::format(
                "plan: grad_sync[{}].method: sufficient_factor applies to matmul weights that are "
                "not expert FFNs or split by batch; op \"{}\" is a {}{}",
                sync_rule[op], m.ops[op].name, model::to_string(m.ops[op].kind),
                coster.split(op) == plan::SplitKind::batch ||
                        coster.split(op) == plan::SplitKind::batch_sharded
                    ? " split by batch"
                    : "")};
          out.factor_ops.push_back(op);
          out.factor_priority = std::max(out.factor_priority, p.grad_sync[sync_rule[op]].priority);
          continue;
        }
        const plan::GradSync* rule = sync_rule[op] < 0 ? nullptr : &p.grad_sync[sync_rule[op]];
        const cost::Algorithm algo = rule ? rule->algorithm : cost::Algorithm::automatic;
        out.params[{method, algo, rule ? rule->priority : 0}] +=
            static_cast<double>(m.ops[op].params);
      }
    }
    return out;
  }

  // At most this many gradient chunks per iteration (each a task, four times over in the
  // unrolled graph): about 1.2 GB and 15 s of simulation on this project's 2-core machine
  // (635,000 chunks took 3 GB and 35 s).
  static constexpr double kMaxChunks = 250'000;
  double num_chunks = 0;

  // DLCP: stage s's gradients, layer by layer as the last backward pass produces them, cut into
  // chunks that wait in one queue per stage (a dynamic stream: the smallest key goes next, whole)
  // and cross the network one at a time, each at its share of the layer's collective; the
  // collective's latency is paid by each layer's first chunk only (the others follow it as a
  // pipelined stream of packets). Each layer's chunks must
  // be in before every replica's next forward pass of that layer; with a loss bound, the ones
  // still queued then may be dropped (task_graph.h).
  Result<bool> add_chunked_sync(int s, double total_grad_bytes) {
    const auto& st = p.stages[s];
    const std::size_t R = st.replicas.size();
    const int stream = g.add_stream(-1, true);
    const int gates = g.add_stream(-1, true);
    const double chunk_bytes =
        opts.grad_chunk_bytes * static_cast<double>(st.replicas[0].devices.size());
    const int pool = static_cast<int>(g.drop_budget.size());
    // Without a loss bound, each layer's chunks sit between two gates of no duration, so that a
    // chunk has one predecessor and one successor rather than one per replica: every replica's
    // backward pass of the layer before its chunks, its chunks before every replica's next
    // forward pass of it. (With one, chunks must be queued the moment a forward pass due looks
    // for them, which a gate would put off to a later event of the same instant.)
    const bool gated = p.loss_bound <= 0;
    double stage_bytes = 0;
    for (std::size_t b = 0; b < buckets[s].size(); ++b) {
      const auto [off, count] = buckets[s][b];
      auto bucket = bucket_sync(s, off, count);
      if (!bucket) return bucket.error();
      const int layer = st.first_layer + off;
      for (const auto& [key, params] : bucket->params) {
        const auto [method, algo, priority] = key;
        const cost::Collective kind = method == plan::SyncMethod::parameter_server
                                          ? cost::Collective::ps_push_pull
                                          : cost::Collective::all_reduce;
        const double bytes = params * param_bytes();
        if (bytes / chunk_bytes > kMaxChunks - num_chunks)
          return Error{fmt::format(
              "grad_chunk_bytes: {:g} bytes per chunk cut the gradients into more than {} "
              "chunks per iteration (expected fewer: a larger chunk)",
              opts.grad_chunk_bytes, kMaxChunks)};
        const auto chunks = layer_chunks(layer, bytes, chunk_bytes, p.grad_priority);
        num_chunks += static_cast<double>(chunks.size());
        const int ready = gated ? add_gate(gates, s, static_cast<int>(b), layer) : -1;
        const int done = gated ? add_gate(gates, s, static_cast<int>(b), layer) : -1;
        for (std::size_t r = 0; r < R && gated; ++r) {
          g.add_edge(bwd_buckets[s][r][b], ready);
          next_edges.push_back({done, fwd_layers[s][r][off]});
        }
        // The layer's collective as one transfer (its algorithm chosen for the whole layer), each
        // chunk taking its share of the bandwidth time and of the bytes on every link (chunks of
        // one size share their loads).
        const Task layer_sync =
            make_transfer(TaskKind::grad_sync, stream, lane_of[s][0], -1, s, -1,
                          static_cast<int>(b), coster.sync_parts(st, bytes, kind, algo));
        std::map<double, std::pair<int, int>> loads_of_size;
        for (std::size_t i = 0; i < chunks.size(); ++i) {
          Task t = layer_sync;
          const double share = chunks[i].bytes / bytes;
          t.duration = layer_sync.duration * share;
          auto [it, fresh] = loads_of_size.try_emplace(chunks[i].bytes);
          if (fresh) {
            it->second.first = static_cast<int>(g.loads.size());
            for (int l = layer_sync.loads_begin; l < layer_sync.loads_end; ++l)
              g.loads.push_back({g.loads[l].link, g.loads[l].bytes * share});
            it->second.second = static_cast<int>(g.loads.size());
          }
          std::tie(t.loads_begin, t.loads_end) = it->second;
          t.priority = priority;
          t.order_key = chunks[i].key;
          if (i > 0) t.latency = 0;
          if (p.loss_bound > 0) {
            t.drop_bytes = chunks[i].bytes;
            t.drop_pool = pool;
          }
          const int id = g.add_task(t);
          chunk_norm.resize(g.tasks.size(), 0.0);
          chunk_norm[id] = chunks[i].norm_share * bytes / total_grad_bytes;
          if (gated) {
            g.add_edge(ready, id);
            g.add_edge(id, done);
          } else {
            // Each forward pass due drops what is late itself (task_graph.h's drop_preds_of).
            for (std::size_t r = 0; r < R; ++r) {
              g.add_edge(bwd_buckets[s][r][b], id);
              next_edges.push_back({id, fwd_layers[s][r][off]});
            }
          }
        }
        stage_bytes += bytes;
      }
    }
    g.drop_budget.push_back(p.loss_bound * stage_bytes);
    return true;
  }

  // A task of no duration on the dynamic stream `stream` (it runs as soon as it is ready).
  int add_gate(int stream, int s, int bucket, int layer) {
    Task t;
    t.kind = TaskKind::grad_sync;
    t.stream = stream;
    t.lane = lane_of[s][0];
    t.stage = s;
    t.bucket = bucket;
    t.order_key = layer;
    return g.add_task(t);
  }

  // Bytes of gradient that cross the network per iteration in all stages with several replicas.
  double synced_grad_bytes() const {
    double total = 0;
    for (std::size_t s = 0; s < p.stages.size(); ++s)
      if (p.stages[s].replicas.size() > 1) total += stage_params(static_cast<int>(s));
    return total * param_bytes();
  }

  Result<bool> add_gradient_sync() {
    find_sync_rules();
    if (chunked()) {
      const double total = synced_grad_bytes();
      for (int s = 0; s < static_cast<int>(p.stages.size()); ++s) {
        if (p.stages[s].replicas.size() > 1) {
          auto ok = add_chunked_sync(s, total);
          if (!ok) return ok;
        }
        // Before the replica's next forward pass (chunked, no optimizer step waits for it).
        for (std::size_t r = 0; r < p.stages[s].replicas.size(); ++r)
          if (const int t = add_inner_sync(s, r); t >= 0)
            next_edges.push_back({t, fwd_layers[s][r][0]});
      }
      add_tied_sync();
      return true;
    }
    const int S = static_cast<int>(p.stages.size());
    const int M = p.num_microbatches;
    const double batch = static_cast<double>(p.global_batch);
    for (int s = 0; s < S; ++s) {
      const auto& st = p.stages[s];
      const std::size_t R = st.replicas.size();
      std::vector<int> sync_tasks;
      std::vector<std::vector<int>> rebuilt(R);  // per replica, its gradient rebuild tasks
      bool synced = false;
      const int stream = R > 1 ? g.add_stream() : -1;
      auto kind_of = [&](plan::SyncMethod method) {
        return method == plan::SyncMethod::parameter_server ? cost::Collective::ps_push_pull
               : p.zero_stage >= 1                          ? cost::Collective::reduce_scatter
                                                            : cost::Collective::all_reduce;
      };
      // Each bucket's synchronisation: per sync rule, its priority, collective and parts.
      struct Costed {
        int priority;
        cost::Collective kind;
        std::vector<cost::CollectiveCost> parts;
      };
      std::vector<std::vector<Costed>> bucket_syncs(R > 1 ? buckets[s].size() : 0);
      std::vector<std::optional<BucketSync>> bucket_rules(bucket_syncs.size());
      // ZeRO-2 and -3: the stage's parameters each rule reduce-scatters.
      std::map<std::tuple<plan::SyncMethod, cost::Algorithm, int>, double> sliced;
      for (std::size_t b = 0; b < bucket_syncs.size(); ++b) {
        auto [off, count] = buckets[s][b];
        auto bucket = bucket_sync(s, off, count);
        if (!bucket) return bucket.error();
        for (const auto& [key, params] : bucket->params) {
          const auto [method, algo, priority] = key;
          bucket_syncs[b].push_back(
              {priority, kind_of(method),
               coster.sync_parts(st, params * param_bytes(), kind_of(method), algo)});
          if (p.zero_stage >= 2 && kind_of(method) == cost::Collective::reduce_scatter)
            sliced[key] += params;
        }
        bucket_rules[b] = std::move(*bucket);
      }
      // ZeRO-2 and -3 keep a slice of the gradients (cost::stage_memory): every micro-batch's are
      // reduce-scattered, the earlier ones' once their backward pass ends on every replica (the
      // runtime's SliceBuckets do it bucket by bucket as the pass goes; here the stage's at once,
      // a task per rule rather than per bucket, which on thousands of devices would multiply the
      // tasks by the buckets), before the last one's buckets on this stream.
      std::vector<Costed> per_pass;
      for (const auto& [key, params] : sliced) {
        const auto [method, algo, priority] = key;
        per_pass.push_back({priority, kind_of(method),
                            coster.sync_parts(st, params * param_bytes(), kind_of(method), algo)});
      }
      for (int mb = 0; mb + 1 < M; ++mb)
        for (const Costed& sync : per_pass) {
          const int t =
              add_transfer(TaskKind::grad_sync, stream, lane_of[s][0], -1, s, mb, -1, sync.parts);
          g.tasks[t].priority = sync.priority;
          for (std::size_t r = 0; r < R; ++r) g.add_edge(bwd_last[s][r][mb], t);
          sync_tasks.push_back(t);
        }
      for (std::size_t b = 0; b < bucket_syncs.size(); ++b) {
        const auto& bucket = bucket_rules[b];
        for (const Costed& sync : bucket_syncs[b]) {
          const int t = add_transfer(TaskKind::grad_sync, stream, lane_of[s][0], -1, s, -1,
                                     static_cast<int>(b), sync.parts);
          g.tasks[t].priority = sync.priority;
          for (std::size_t r = 0; r < R; ++r) g.add_edge(bwd_buckets[s][r][b], t);
          sync_tasks.push_back(t);
          synced = true;
        }
        if (bucket->factor_ops.empty()) continue;
        // Sufficient factors: every replica gathers the others' factors, then rebuilds the whole
        // gradient on its compute stream.
        const int t =
            add_transfer(TaskKind::grad_sync, stream, lane_of[s][0], -1, s, -1, static_cast<int>(b),
                         coster.factor_gathers(st, bucket->factor_ops, batch));
        g.tasks[t].priority = bucket->factor_priority;
        for (std::size_t r = 0; r < R; ++r) {
          g.add_edge(bwd_buckets[s][r][b], t);
          Task rt;
          rt.kind = TaskKind::grad_rebuild;
          rt.stream = lane_compute_stream[lane_of[s][r]];
          rt.lane = lane_of[s][r];
          rt.stage = s;
          rt.bucket = static_cast<int>(b);
          rt.duration = coster.rebuild_time(st, r, bucket->factor_ops, batch);
          const int id = g.add_task(rt);
          g.add_edge(t, id);
          rebuilt[r].push_back(id);
        }
        synced = true;
      }
      // Ops split by batch inside a replica: their whole gradients are all-reduced over the
      // replica's devices once its backward pass ends, before its optimizer step.
      std::vector<int> inner(R, -1);
      for (std::size_t r = 0; r < R; ++r) inner[r] = add_inner_sync(s, r);
      // Optimizer step on each replica, after its stage's gradients are synchronised.
      std::vector<int> opt;
      for (std::size_t r = 0; r < R; ++r) {
        Task t;
        t.kind = TaskKind::optimizer;
        t.stream = lane_compute_stream[lane_of[s][r]];
        t.lane = lane_of[s][r];
        t.stage = s;
        t.duration = times[s][r].optimizer;
        const int id = g.add_task(t);
        g.add_edge(bwd_buckets[s][r].back(), id);
        if (inner[r] >= 0) g.add_edge(inner[r], id);
        for (int st_id : sync_tasks) g.add_edge(st_id, id);
        for (int rb : rebuilt[r]) g.add_edge(rb, id);
        opt.push_back(id);
      }
      optimizer_task[s] = opt;
      stage_syncs[s] = sync_tasks;
      // ZeRO 1 and 2: the updated parameter shards are gathered back (ZeRO-3 gathers them before
      // every pass instead). Under Plan::overlap param the gather runs beside the next
      // iteration's first forward pass instead (Megatron-LM's --overlap-param-gather, each
      // layer's bucket before that layer's forward): here the previous iteration's, from the
      // start, which every pass after the first micro-batch's forward waits for (and, iterations
      // run back to back, this iteration's optimizer steps come before the next one's).
      if (synced && (p.zero_stage == 1 || p.zero_stage == 2)) {
        const auto parts =
            coster.sync_parts(st, stage_params(s) * param_bytes(), cost::Collective::all_gather,
                              cost::Algorithm::automatic);
        const int t = add_transfer(TaskKind::param_gather, g.add_stream(), lane_of[s][0], -1, s, -1,
                                   -1, parts);
        if (plan::overlaps_param_gather(p.overlap)) {
          for (std::size_t r = 0; r < R; ++r) {
            g.add_edge(t, bwd[s][r][0]);
            if (p.num_microbatches > 1) g.add_edge(t, fwd[s][r][1]);
          }
          for (int id : opt) next_edges.push_back({id, t});
        } else {
          for (int id : opt) g.add_edge(id, t);
        }
      }
    }
    add_tied_sync();
    return true;
  }

  // The all-reduce over replica r's devices of the gradients of stage s's ops split by batch
  // inside a replica, once its last backward pass ends; -1 when there is none.
  int add_inner_sync(int s, std::size_t r) {
    const auto& st = p.stages[s];
    const auto& rep = st.replicas[r];
    const double batch_params = coster.batch_split_params(st.first_layer, st.num_layers);
    if (batch_params <= 0 || rep.devices.size() < 2) return -1;
    const auto part = coster.collective(cost::Collective::all_reduce, rep.devices,
                                        batch_params * param_bytes(), rep.tp_shares);
    const int t =
        add_transfer(TaskKind::grad_sync, g.add_stream(), lane_of[s][r], -1, s, -1, -1, {part});
    g.add_edge(bwd_buckets[s][r].back(), t);
    return t;
  }

  // A tied LM head on another stage than the word embedding whose table it reads keeps a copy of
  // the table (cost::stage_memory counts it). Once both stages have summed their gradients over
  // their replicas, the two copies' gradients are summed over both stages' replicas, one
  // all-reduce per tensor-parallel rank (Megatron-LM's embedding group; the runtime's), before
  // either stage steps.
  void add_tied_sync() {
    const int head = m.tied_reader();
    if (head < 0) return;
    const int a = plan::stage_of_layer(p, m.layer_of(m.tied_owner()));
    const int b = plan::stage_of_layer(p, m.layer_of(head));
    if (a < 0 || b < 0 || a == b) return;
    plan::Stage both = p.stages[a];
    both.replicas.insert(both.replicas.end(), p.stages[b].replicas.begin(),
                         p.stages[b].replicas.end());
    const auto parts =
        coster.sync_parts(both, static_cast<double>(m.ops[head].tied_params) * param_bytes(),
                          cost::Collective::all_reduce, cost::Algorithm::automatic);
    const int t =
        add_transfer(TaskKind::grad_sync, g.add_stream(), lane_of[a][0], -1, a, -1, -1, parts);
    for (int s : {a, b}) {
      for (const auto& buckets_of_replica : bwd_buckets[s])
        g.add_edge(buckets_of_replica.back(), t);
      for (int sync : stage_syncs[s]) g.add_edge(sync, t);
      for (int opt : optimizer_task[s]) g.add_edge(t, opt);
    }
    // Chunked, the next forward passes of the two layers wait for it instead of an optimizer step.
    if (chunked())
      for (int s : {a, b}) {
        const int layer = m.layer_of(s == a ? m.tied_owner() : head);
        for (const auto& layers_of_replica : fwd_layers[s])
          next_edges.push_back({t, layers_of_replica[layer - p.stages[s].first_layer]});
      }
  }
};

// Activation bytes per micro-batch and fixed bytes of one stage replica's device j.
struct StageMemory {
  cost::MemoryBreakdown fixed;  // inflight = 0
  double per_microbatch = 0;    // activation bytes added by one more live micro-batch
  double fragmentation_share = 0;  // the allocator's (MemoryConfig::fragmentation)
};

StageMemory stage_memory_of(const model::Model& m, const plan::Plan& p, const plan::Stage& st,
                            const plan::Replica& r, int j) {
  cost::MemoryConfig cfg =
      memory_config(m, p, st.first_layer, st.num_layers, r, j, static_cast<int>(st.replicas.size()),
                    r.batch_share * static_cast<double>(p.global_batch) / p.num_microbatches, 0);
  StageMemory out;
  out.fixed = cost::stage_memory(m, cfg);
  out.fragmentation_share = cfg.fragmentation;
  cfg.inflight_microbatches = 1;
  out.per_microbatch = (cost::stage_memory(m, cfg).activations - out.fixed.activations).value;
  return out;
}

// What simulate() reports besides the time and the events: per-device statistics from `busy`
// (summed over `measured` iterations), the lanes, and memory.
void finish_result(const model::Model& m, const cluster::Cluster& c, const plan::Plan& p,
                   const Lowering& low, const std::vector<detail::BusyTimes>& busy,
                   long long measured, SimResult& r) {
  const double iteration_time = r.iteration_time.value;
  r.lanes = low.lanes;
  // Per-device statistics.
  r.devices.resize(c.devices.size());
  for (std::size_t d = 0; d < c.devices.size(); ++d) {
    r.devices[d].device = static_cast<int>(d);
    r.devices[d].capacity = c.type_of(static_cast<int>(d)).memory;
  }
  for (std::size_t d = 0; d < c.devices.size(); ++d) {
    const double n = static_cast<double>(measured);
    r.devices[d].compute_busy = Seconds(busy[d].compute / n);
    r.devices[d].comm_busy = Seconds(busy[d].comm / n);
    r.devices[d].idle = Seconds(std::max(0.0, iteration_time - busy[d].either / n));
  }

  // Memory: the fixed part of every chunk a device holds plus, at the worst point of its lane's
  // pass order, the activations of the micro-batches still waiting for their backward pass. A
  // stage's replicas differ in memory only by their tensor-parallel degree, the device's share and
  // their batch share: worked out once per (stage, degree, share, batch share).
  std::map<std::tuple<int, std::size_t, double, double>, StageMemory> stage_memory;
  for (std::size_t l = 0; l < low.lanes.size(); ++l) {
    const LaneInfo& lane = low.lanes[l];
    for (std::size_t j = 0; j < lane.devices.size(); ++j) {
      const int d = lane.devices[j];
      cost::MemoryBreakdown fixed;
      double share = 0;
      std::vector<double> per_mb;
      for (int s : lane.stages) {
        const auto& st = p.stages[s];
        std::size_t ri = 0;
        while (low.lane_of[s][ri] != static_cast<int>(l)) ++ri;
        // Device d's index within this replica.
        const auto& rep = st.replicas[ri];
        const int jj = static_cast<int>(std::find(rep.devices.begin(), rep.devices.end(), d) -
                                        rep.devices.begin());
        const auto key =
            std::make_tuple(s, rep.devices.size(),
                            plan::tp_share(rep, static_cast<std::size_t>(jj)), rep.batch_share);
        auto it = stage_memory.find(key);
        if (it == stage_memory.end())
          it = stage_memory.emplace(key, stage_memory_of(m, p, st, rep, jj)).first;
        const StageMemory& sm = it->second;
        fixed.parameters += sm.fixed.parameters;
        fixed.gradients += sm.fixed.gradients;
        fixed.optimizer += sm.fixed.optimizer;
        fixed.activations += sm.fixed.activations;
        fixed.transient = max(fixed.transient, sm.fixed.transient);
        fixed.buffers = max(fixed.buffers, sm.fixed.buffers);
        fixed.reserve = max(fixed.reserve, sm.fixed.reserve);
        share = sm.fragmentation_share;
        per_mb.push_back(sm.per_microbatch);
      }
      double peak_act = 0, cur = 0;
      for (const PassRef& pr : low.lane_order[l]) {
        cur += (pr.forward ? 1 : -1) * per_mb[pr.chunk];
        peak_act = std::max(peak_act, cur);
      }
      auto& ds = r.devices[d];
      ds.lane = static_cast<int>(l);
      ds.memory = fixed;
      ds.memory.activations += Bytes(peak_act);
      ds.memory.fragmentation = cost::allocator_fragmentation(ds.memory, share);
      ds.peak_memory = ds.memory.total();
      ds.fits = ds.peak_memory <= ds.capacity;
    }
  }
  detail::summarise(m, c, p, r);
}

constexpr const char* kDeadlock =
    "plan: the schedule's pass order contradicts its dependencies (the simulation deadlocked)";

// DLCP's chunked transport (plan.h's GradPriority): iterations overlap, the next one's forward
// pass of a layer starting once that layer's chunks are in, so kUnrolled iterations run back to
// back in one graph and the iteration time is the mean time between the starts of the middle
// ones (the first starts with an idle network; the last has no successor to drop its chunks).
// The events are those of the second iteration, from its start.
constexpr int kUnrolled = 4;

Result<SimResult> simulate_unrolled(const model::Model& m, const cluster::Cluster& c,
                                    const plan::Plan& p, const Lowering& low,
                                    const std::vector<double>& caps) {
  const detail::TaskGraph g = detail::unroll_iterations(low.g, kUnrolled, low.next_edges);
  const auto eng = detail::run_engine(g, caps);
  const std::size_t n = low.g.tasks.size();
  if (eng.deadlock) return Error{kDeadlock};
  std::vector<double> start(kUnrolled, std::numeric_limits<double>::infinity());
  for (std::size_t t = 0; t < g.tasks.size(); ++t) {
    const std::size_t k = t / n;
    if (!eng.dropped[t]) start[k] = std::min(start[k], eng.start[t]);
  }
  SimResult r;
  r.iteration_time = Seconds((start[kUnrolled - 1] - start[1]) / (kUnrolled - 2) +
                             detail::between_steps_time(low.compute, c, low.lanes));
  r.num_tasks = static_cast<long long>(n);
  r.num_events = eng.events;
  // Dropped chunks of the measured iterations (1 .. kUnrolled - 2).
  double dropped = 0, sent = 0, norm = 0;
  for (std::size_t t = n; t < (kUnrolled - 1) * n; ++t) {
    const double bytes = g.tasks[t].drop_bytes;
    sent += bytes;
    if (!eng.dropped[t]) continue;
    dropped += bytes;
    norm += low.chunk_norm.size() > t % n ? low.chunk_norm[t % n] : 0.0;
  }
  r.grad_dropped_fraction = sent > 0 ? dropped / sent : 0.0;
  r.grad_dropped_norm_fraction = norm / (kUnrolled - 2);
  if (low.opts.record_events)
    for (std::size_t t = n; t < 2 * n; ++t) {
      const Task& task = g.tasks[t];
      r.events.push_back(TaskRecord{task.kind, task.lane, task.peer_lane, task.stage,
                                    task.microbatch, task.bucket, Seconds(eng.start[t] - start[1]),
                                    Seconds(eng.end[t] - start[1])});
    }
  detail::TransferLanes lanes_of_task{std::vector<int>(g.tasks.size()), low.transfer_lanes.lists};
  for (std::size_t t = 0; t < g.tasks.size(); ++t)
    lanes_of_task.list_of[t] = low.transfer_lanes.list_of[t % n];
  const auto busy = detail::busy_times(g, low.lanes, lanes_of_task, eng, c.num_devices());
  finish_result(m, c, p, low, busy, kUnrolled, r);
  return r;
}

Result<SimResult> simulate_plan(const model::Model& m, const cluster::Cluster& c,
                                const plan::Plan& p, const SimOptions& options) {
  SimOptions opts = options;
  opts.network.spray = p.multipath == plan::Multipath::spray;
  if (!(opts.grad_chunk_bytes > 0))
    return Error{
        fmt::format("grad_chunk_bytes: expected a number > 0, got {:g}", opts.grad_chunk_bytes)};
  if (p.is_op_level()) return detail::simulate_op_level(m, c, p, opts);
  if (p.stages.empty()) return Error{"plan: stages: expected at least one stage"};
  Lowering low(m, c, p, opts);
  auto built = low.build();
  if (!built) return built.error();
  const std::vector<double> caps = cost::link_rates(c, opts.network);
  if (low.chunked()) return simulate_unrolled(m, c, p, low, caps);
  // (Under CPU quotas: the steady state of iterations back to back. Statistics are means too;
  // the events, every iteration's.)
  const auto runs =
      detail::run_iterations(low.g, caps, low.lanes, low.transfer_lanes, c.num_devices());
  if (runs.last.deadlock) return Error{kDeadlock};
  const detail::EngineResult& eng = runs.last;
  const double iteration_time = runs.iteration_time;
  const long long events = runs.events, measured = runs.measured;
  const std::vector<detail::BusyTimes>& busy = runs.busy;

  SimResult r;
  r.iteration_time =
      Seconds(iteration_time + detail::between_steps_time(low.compute, c, low.lanes));
  r.num_tasks = static_cast<long long>(low.g.tasks.size());
  r.num_events = events;
  if (opts.record_events)
    for (std::size_t t = 0; t < low.g.tasks.size(); ++t) {
      const Task& task = low.g.tasks[t];
      r.events.push_back(TaskRecord{task.kind, task.lane, task.peer_lane, task.stage,
                                    task.microbatch, task.bucket, Seconds(eng.start[t]),
                                    Seconds(eng.end[t])});
    }
  finish_result(m, c, p, low, busy, measured, r);
  return r;
}

}  // namespace

Result<SimResult> simulate(const model::Model& m, const cluster::Cluster& c, const plan::Plan& p,
                           const SimOptions& opts) {
  if (opts.stop && opts.stop()) return Error{kSimulationStopped};
  try {
    return simulate_plan(m, c, p, opts);
  } catch (const detail::Stopped&) {
    return Error{kSimulationStopped};
  }
}

}  // namespace hetplan::sim
