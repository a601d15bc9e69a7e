// Op-level plans (HeteroG, TAG) lowered op by op. Each device the plan uses is a lane with one
// compute stream that runs its ready tasks one at a time, in the plan's execution order (FIFO, or
// HEFT's upward rank). Per op, device of its group and micro-batch: a forward task on the
// device's share of the micro-batch's samples and a backward task after it. A data edge inside a
// group stays on the device; an edge between groups moves each sample's activation from the
// device that produced it to the device that consumes it (samples lie in device order over each
// group's shares, so a pair of devices exchanges the overlap of their intervals), and the
// activation gradient back the same way. Once every micro-batch's backward pass of a group's ops
// is done on all its devices, the group synchronises its weight gradients (all-reduce or parameter
// server in buckets of the plan's grad_bucket_bytes, each as soon as the backward passes over its
// weights are done; or sufficient factors gathered and rebuilt) and its devices step their
// optimizer.
//
// A split group (tensor parallelism) runs every sample of a micro-batch on each of its devices,
// each computing its tensor share of the group's ops (tensor_layout.h: matmuls by features,
// attention by heads, convolutions by output channels; norms and elementwise ops whole). Inside
// the group an activation that changes layout between two ops is converted by a collective over
// the group's devices (a row-split output all-reduced before a replicated reader; a column-split
// op's partial input gradient all-reduced in the backward pass). It enters the group whole on
// every device; it leaves it replicated (converted first where it is not), each device sending
// the samples of its share's interval, and its gradient comes back the same way and is gathered on
// every device. A split group's devices hold their share of its weights. A split group of several
// replicas (OpGroup::replica_sizes) runs each replica so on its batch share, its collectives over
// the replica's devices, and the replicas all-reduce their weight gradients (add_replica_sync)
// or, with sync sufficient_factor, gather their matmuls' factors (add_split_factors); a split
// group of one replica synchronises nothing. Split groups laid out alike (same_split_layout) pass
// activations as one group does.
#include "op_level.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <tuple>

#include "hetplan/core/graph.h"
#include "hetplan/model/training.h"
#include "hetplan/plan/op_groups.h"
#include "hetplan/sim/grad_sync.h"
#include "hetplan/sim/gradient_buckets.h"
#include "hetplan/sim/tensor_layout.h"
#include "lowering_common.h"
#include "task_graph.h"

namespace hetplan::sim::detail {
namespace {

struct OpLevelLowering {
  const model::Model& m;
  const cluster::Cluster& c;
  const plan::Plan& p;
  const SimOptions& opts;
  cost::ComputeCostModel compute;
  model::TrainingGraph tg;
  std::vector<int> backward_index, optimizer_index;  // per op, -1 for none
  std::vector<int> group_of;                         // per op
  // Per group and device, the interval of each micro-batch's samples (as fractions) it sends to
  // other groups and the one it holds: the same in a replicated group; in a split group every
  // device holds its replica's samples and sends its tensor share's interval of them.
  using Interval = std::pair<double, double>;
  std::vector<std::vector<Interval>> sends, holds;
  // Per group, each replica's devices (plan::replica_members) and, for a split group whose
  // replicas split alike, its places (plan::replica_places).
  std::vector<std::vector<std::vector<std::size_t>>> members_of, places_of;
  // Per group, the first group laid out as it (plan::same_split_layout; itself when none): ops of
  // split groups of one layout pass activations as inside one group.
  std::vector<int> layout_id;
  // A tied LM head in another group than its table ({head, table}): it holds a copy of the table.
  std::optional<std::pair<int, int>> tied;
  TaskGraph g;
  std::vector<LaneInfo> lanes;
  std::vector<int> lane_of_device;
  std::vector<int> lane_stream;
  std::vector<int> lane_quota;  // per lane: index into g.quotas, or -1
  TransferLanes transfer_ends;  // per transfer, the lanes at its links' ends
  std::vector<std::vector<std::vector<int>>> fwd, bwd;  // [op][device index in group][mb]
  // Recomputation (plan::recompute_segments): per op its segment (-1: none), and per segment,
  // device index in its group and micro-batch, the task rerunning its forward passes.
  std::vector<std::vector<int>> segments;
  std::vector<int> segment_of;
  std::vector<std::vector<std::vector<int>>> rerun;
  // Split groups: each op's layouts, and per op, replica and micro-batch the collectives that
  // follow its forward pass (its output ready on every device of the replica) and its backward
  // pass (its input gradients ready), or -1.
  std::vector<OpLayout> layout;
  std::vector<std::vector<std::vector<int>>> post_fwd, post_bwd;
  // Split groups: per op consumed outside its group, replica and micro-batch, the conversion of
  // its output to replicated before it leaves (-1: none needed) and the gathering of its returned
  // gradient.
  std::map<std::tuple<int, int, int>, int> exit_fwd, exit_bwd;
  std::vector<double> activation_delta;  // per task: bytes its lane keeps (+) or frees (-)
  std::vector<double> transient;         // per task: bytes its lane holds while it runs
  std::vector<cost::MemoryBreakdown> fixed_memory;  // per device
  std::map<std::tuple<int, int, double>, cost::CollectiveCost> p2p_cache;

  OpLevelLowering(const model::Model& m_, const cluster::Cluster& c_, const plan::Plan& p_,
                  const SimOptions& o)
      : m(m_), c(c_), p(p_), opts(o), compute(o.compute, o.profile) {
    g.stop = StopPoll(opts.stop);
  }

  int M() const { return p.num_microbatches; }
  double batch() const { return static_cast<double>(p.global_batch); }
  double samples(int group, std::size_t j) const {
    return plan::group_share(p.op_groups[group], j) * batch() / M();
  }
  double param_bytes() const { return model::dtype_bytes(m.dtype); }
  bool is_split(int group) const { return p.op_groups[group].mode == plan::GroupMode::split; }
  int replicas(int group) const { return plan::replica_count(p.op_groups[group]); }
  int replica(int group, std::size_t j) const { return plan::replica_of(p.op_groups[group], j); }
  // The indices of replica r's devices in group `group`, in the group's order (members_of).
  const std::vector<std::size_t>& replica_members(int group, int r) const {
    return members_of[static_cast<std::size_t>(group)][static_cast<std::size_t>(r)];
  }
  // Op `op`'s share of its tensor dimension on device j of its group: 1 outside split groups and
  // for ops computed whole.
  double shard(int op, std::size_t j) const {
    const int gi = group_of[op];
    if (!is_split(gi) || computes_whole(m.ops[op], plan::SplitKind::tensor, false)) return 1.0;
    return plan::tensor_share(p.op_groups[gi], j);
  }
  // The same for its weights (and gradients and optimizer states).
  double weight_shard(int op, std::size_t j) const {
    const int gi = group_of[op];
    if (!is_split(gi) || holds_whole_weights(m.ops[op], plan::SplitKind::tensor)) return 1.0;
    return plan::tensor_share(p.op_groups[gi], j);
  }
  // The task after which op's output of micro-batch mb is ready on device j of its group, and the
  // one after which its input gradients are.
  int output_ready(int op, std::size_t j, int mb) const {
    const int after = post_fwd[op][replica(group_of[op], j)][mb];
    return after >= 0 ? after : fwd[op][j][mb];
  }
  int input_grads_ready(int op, std::size_t j, int mb) const {
    const int after = post_bwd[op][replica(group_of[op], j)][mb];
    return after >= 0 ? after : bwd[op][j][mb];
  }

  // Seconds of one pass on `device` (at full speed: a node limited to a share of its CPU has its
  // lanes' streams under a quota, build_lanes).
  double device_time(int device, const model::TrainOp& op, double n, double shard = 1.0) const {
    return engine_pass_time(compute, c.type_of(device), op, n, shard, m.dtype, p);
  }

  // The host issues each device's ops in turn and the device runs their kernels behind it: per
  // layer and device, the kernels of that layer's ops there take together at least the host's time
  // to issue them (stage_costs.cc). Here each of those ops' passes is stretched alike by what the
  // host adds: [op][device index in group], forward, backward, and the rerun of a recomputed op
  // (whose floor counts the layer's recomputed ops only, as the stage simulator's does).
  std::vector<std::vector<double>> host_stretch_fwd, host_stretch_bwd, host_stretch_rerun;

  void compute_host_stretch() {
    struct Sum {
      double kernels = 0;
      int ops = 0;
      void add(double t) {
        if (t > 0) kernels += t, ++ops;
      }
      double stretch(double host) const {  // the pass's paced time over its kernels'
        return kernels > 0 ? host_paced(kernels, ops, host) / kernels : 1.0;
      }
    };
    std::map<std::pair<int, int>, Sum> fwd_sum, bwd_sum, rerun_sum;  // by (layer, device)
    const std::size_t n = m.ops.size();
    auto key = [&](std::size_t op, std::size_t j) {
      return std::make_pair(m.ops[op].layer, p.op_groups[group_of[op]].devices[j]);
    };
    for (std::size_t op = 0; op < n; ++op) {
      const int gi = group_of[op];
      for (std::size_t j = 0; j < p.op_groups[gi].devices.size(); ++j) {
        const int d = p.op_groups[gi].devices[j];
        const double s = samples(gi, j), sh = shard(static_cast<int>(op), j);
        const double tf = device_time(d, tg.forward[op], s, sh);
        fwd_sum[key(op, j)].add(tf);
        if (segment_of[op] >= 0) rerun_sum[key(op, j)].add(tf);
        if (backward_index[op] >= 0)
          bwd_sum[key(op, j)].add(device_time(d, tg.backward[backward_index[op]], s, sh));
      }
    }
    host_stretch_fwd.assign(n, {});
    host_stretch_bwd.assign(n, {});
    host_stretch_rerun.assign(n, {});
    for (std::size_t op = 0; op < n; ++op)
      for (std::size_t j = 0; j < p.op_groups[group_of[op]].devices.size(); ++j) {
        const auto k = key(op, j);
        const auto& type = c.type_of(k.second);
        const double forward = compute.host_op_time(type, true).value;
        host_stretch_fwd[op].push_back(fwd_sum[k].stretch(forward));
        host_stretch_bwd[op].push_back(bwd_sum[k].stretch(compute.host_op_time(type, false).value));
        host_stretch_rerun[op].push_back(rerun_sum[k].stretch(forward));
      }
  }

  void index_training_graph() {
    tg = model::derive_training_graph(m);
    backward_index.assign(m.ops.size(), -1);
    optimizer_index.assign(m.ops.size(), -1);
    for (std::size_t i = 0; i < tg.backward.size(); ++i)
      backward_index[tg.backward[i].op] = static_cast<int>(i);
    for (std::size_t i = 0; i < tg.optimizer.size(); ++i)
      optimizer_index[tg.optimizer[i].op] = static_cast<int>(i);
  }

  void build_lanes() {
    std::vector<int> used;
    for (const auto& grp : p.op_groups)
      used.insert(used.end(), grp.devices.begin(), grp.devices.end());
    std::sort(used.begin(), used.end());
    used.erase(std::unique(used.begin(), used.end()), used.end());
    lane_of_device.assign(c.devices.size(), -1);
    for (int d : used) {
      const int l = static_cast<int>(lanes.size());
      lane_of_device[d] = l;
      lanes.push_back(LaneInfo{{d}, {}, lane_name(l, {d})});
      // A node limited to a share of its CPU (cluster files' cpu_share, emulated clusters) runs
      // its lanes under that quota, as the stage lowering does; a CPU worker without one shares
      // the host's cores, where they are given (SimOptions::host_cores). The quota is the share
      // itself, over every pass, the host's wait for its ops included (the stage lowering slows
      // only a pass's kernels by it, so the two differ where the host paces a GPU's passes).
      const double share = c.nodes[c.devices[d].node].cpu_share;
      const bool unthrottled_cpu = share >= 1 && opts.host_cores > 0 &&
                                   c.type_of(d).architecture == cluster::Architecture::cpu;
      int quota = -1;
      if (share < 1 || unthrottled_cpu) {
        quota = static_cast<int>(g.quotas.size());
        g.quotas.push_back(CpuQuota{share, cluster::kCpuQuotaPeriod.value, 1, unthrottled_cpu});
        g.host_cores = opts.host_cores;
      }
      lane_quota.push_back(quota);
      lane_stream.push_back(g.add_stream(quota, true));
    }
    for (std::size_t gi = 0; gi < p.op_groups.size(); ++gi)
      for (int d : p.op_groups[gi].devices)
        lanes[lane_of_device[d]].stages.push_back(static_cast<int>(gi));
    sends.resize(p.op_groups.size());
    holds.resize(p.op_groups.size());
    for (const auto& grp : p.op_groups) {
      members_of.emplace_back();
      for (int r = 0; r < plan::replica_count(grp); ++r)
        members_of.back().push_back(plan::replica_members(grp, r));
      places_of.push_back(plan::replica_places(grp));
      const auto gi = static_cast<int>(layout_id.size());
      layout_id.push_back(gi);
      for (int o = 0; o < gi; ++o)
        if (plan::same_split_layout(p.op_groups[o], grp)) {
          layout_id.back() = o;
          break;
        }
    }
    for (std::size_t gi = 0; gi < p.op_groups.size(); ++gi) {
      const auto& grp = p.op_groups[gi];
      const bool split = is_split(static_cast<int>(gi));
      const int gid = static_cast<int>(gi);
      const std::size_t n = grp.devices.size();
      double at = 0;  // the start of device j's replica (or its own)
      for (std::size_t j = 0; j < n; ++j) {
        const int r = replica(gid, j);
        if (j > 0 && (!split || r != replica(gid, j - 1))) at = holds[gi].back().second;
        const bool last_unit = split ? r + 1 == replicas(gid) : j + 1 == n;
        holds[gi].emplace_back(at, last_unit ? 1.0 : at + plan::group_share(grp, j));
      }
      sends[gi] = holds[gi];
      if (!split) continue;
      // A split replica's devices send consecutive parts of its rows by their tensor shares, in
      // increasing device order (the runtime's rank order).
      for (int r = 0; r < replicas(gid); ++r) {
        auto members = replica_members(gid, r);
        std::sort(members.begin(), members.end(),
                  [&](std::size_t x, std::size_t y) { return grp.devices[x] < grp.devices[y]; });
        const auto [lo, hi] = holds[gi][members.front()];
        double part = lo;
        for (std::size_t i = 0; i < members.size(); ++i) {
          const double to =
              i + 1 == members.size() ? hi : part + plan::tensor_share(grp, members[i]) * (hi - lo);
          sends[gi][members[i]] = {part, to};
          part = to;
        }
      }
    }
  }

  int add_task(Task t, double activation = 0) {
    const int id = g.add_task(std::move(t));
    activation_delta.push_back(activation);
    transient.push_back(0);
    return id;
  }

  Task compute_task(TaskKind kind, int device, int group, int mb, double duration) const {
    Task t;
    t.kind = kind;
    t.lane = lane_of_device[device];
    t.stream = lane_stream[t.lane];
    t.stage = group;
    t.microbatch = mb;
    t.duration = duration;
    return t;
  }

  int add_transfer(TaskKind kind, int lane, int peer, int group, int mb,
                   const cost::CollectiveCost& cc) {
    Task t;
    t.kind = kind;
    t.is_transfer = true;
    t.stream = g.add_stream();
    t.lane = lane;
    t.peer_lane = peer;
    t.stage = group;
    t.microbatch = mb;
    t.latency = cc.latency.value;
    t.duration = (cc.time - cc.latency).value;
    t.loads_begin = static_cast<int>(g.loads.size());
    g.loads.insert(g.loads.end(), cc.loads.begin(), cc.loads.end());
    t.loads_end = static_cast<int>(g.loads.size());
    return add_task(std::move(t));
  }

  cost::CollectiveCost collective(cost::Collective kind, std::vector<int> devices, double bytes,
                                  std::vector<double> shares = {},
                                  cost::Algorithm algo = cost::Algorithm::automatic) const {
    cost::CollectiveRequest req;
    req.kind = kind;
    req.devices = std::move(devices);
    req.bytes = Bytes(bytes);
    req.shares = std::move(shares);
    req.algorithm = algo;
    return cost::collective_cost(c, req, opts.network);
  }

  const cost::CollectiveCost& p2p(int from, int to, double bytes) {
    auto key = std::make_tuple(from, to, bytes);
    auto it = p2p_cache.find(key);
    if (it == p2p_cache.end())
      it = p2p_cache.emplace(key, collective(cost::Collective::p2p, {from, to}, bytes)).first;
    return it->second;
  }

  void add_passes() {
    const std::size_t n = m.ops.size();
    fwd.assign(n, {});
    bwd.assign(n, {});
    post_fwd.resize(n);
    post_bwd.resize(n);
    layout.resize(n);
    for (std::size_t op = 0; op < n; ++op) {
      const int gi = group_of[op];
      const auto& grp = p.op_groups[gi];
      layout[op] = op_layout(m.ops[op], plan::SplitKind::tensor, false);
      post_fwd[op].assign(static_cast<std::size_t>(replicas(gi)), std::vector<int>(M(), -1));
      post_bwd[op].assign(static_cast<std::size_t>(replicas(gi)), std::vector<int>(M(), -1));
      fwd[op].assign(grp.devices.size(), std::vector<int>(M(), -1));
      bwd[op].assign(grp.devices.size(), std::vector<int>(M(), -1));
      for (std::size_t j = 0; j < grp.devices.size(); ++j) {
        const int d = grp.devices[j];
        const double s = samples(gi, j), sh = shard(static_cast<int>(op), j);
        const double kept = cost::saved_bytes(m, m.ops[op], p.loss) * s * sh;
        // (A recomputed op keeps its saved bytes from its rerun instead: add_reruns.)
        const bool recomputed = segment_of[op] >= 0;
        for (int mb = 0; mb < M(); ++mb) {
          fwd[op][j][mb] = add_task(
              compute_task(TaskKind::forward, d, gi, mb,
                           device_time(d, tg.forward[op], s, sh) * host_stretch_fwd[op][j]),
              recomputed ? 0.0 : kept);
          const double back = backward_index[op] < 0
                                  ? 0.0
                                  : device_time(d, tg.backward[backward_index[op]], s, sh) *
                                        host_stretch_bwd[op][j];
          bwd[op][j][mb] = add_task(compute_task(TaskKind::backward, d, gi, mb, back), -kept);
          transient.back() = cost::transient_bytes(m, m.ops[op], p.loss) * s * sh;
          g.add_edge(fwd[op][j][mb], bwd[op][j][mb]);
        }
      }
      if (is_split(gi)) add_split_op_collectives(static_cast<int>(op));
    }
    add_reruns();
  }

  // The task that an op's gradient arriving from its consumers waits for: the rerun of its
  // segment where it is a recomputed segment's last op (the runtime reruns the segment when its
  // backward pass reaches that op), else its backward pass.
  int grad_arrival(int op, std::size_t j, int mb) const {
    const int s = segment_of[op];
    if (s >= 0 && segments[static_cast<std::size_t>(s)].back() == op)
      return rerun[static_cast<std::size_t>(s)][j][mb];
    return bwd[op][j][mb];
  }

  // Recomputation: per segment (plan::recompute_segments), device and micro-batch, a task that
  // reruns the forward passes of the segment's ops before any of their backward passes, keeping
  // their saved bytes from then on; in a split group, the layout conversions of its ops' inputs
  // (from the segment, or from a group laid out alike; and its experts' token exchanges, a
  // vocabulary-split loss's sums) run again after it, in order, over each replica. Under full
  // recomputation a segment keeps the activations it reads from outside it (its layer's input) from
  // its first op's forward pass to its backward pass.
  void add_reruns() {
    rerun.assign(segments.size(), {});
    for (std::size_t si = 0; si < segments.size(); ++si) {
      const std::vector<int>& seg = segments[si];
      const int gi = group_of[seg.front()];
      const auto& grp = p.op_groups[gi];
      std::vector<int> outside;  // producers outside the segment that its ops read
      for (int op : seg)
        for (int in : m.ops[op].inputs)
          if (segment_of[in] != static_cast<int>(si) &&
              std::find(outside.begin(), outside.end(), in) == outside.end())
            outside.push_back(in);
      rerun[si].assign(grp.devices.size(), std::vector<int>(M(), -1));
      for (std::size_t j = 0; j < grp.devices.size(); ++j) {
        const int d = grp.devices[j];
        const double s = samples(gi, j);
        double time = 0, kept = 0, input = 0;
        for (int op : seg) {
          const double sh = shard(op, j);
          time += device_time(d, tg.forward[op], s, sh) * host_stretch_rerun[op][j];
          kept += cost::saved_bytes(m, m.ops[op], p.loss) * s * sh;
        }
        for (int in : outside) {  // (a partial sum is whole on every device)
          const bool sharded = layout_id[group_of[in]] == layout_id[gi] && is_split(gi) &&
                               layout[in].output == Layout::feature;
          input += m.output_bytes(in) * s * (sharded ? shard(in, j) : 1.0);
        }
        if (p.recompute != cost::Recompute::full) input = 0;
        for (int mb = 0; mb < M(); ++mb) {
          const int t = add_task(compute_task(TaskKind::recompute, d, gi, mb, time), kept);
          rerun[si][j][mb] = t;
          for (int op : seg) g.add_edge(fwd[op][j][mb], t);
          activation_delta[static_cast<std::size_t>(fwd[seg.front()][j][mb])] += input;
          activation_delta[static_cast<std::size_t>(bwd[seg.front()][j][mb])] -= input;
        }
      }
      // What the rerun's ops exchange over each replica of a split group, in op order.
      std::vector<std::pair<cost::Collective, double>> exchanges;
      if (is_split(gi)) {
        const double n = batch() / M();
        std::vector<std::pair<int, Layout>> converted;
        for (int op : seg) {
          // (Inputs from the segment, and from outside it in a layout of this group's, which the
          // rerun converts again; others entered whole and are sliced in place.)
          for (int in : m.ops[op].inputs) {
            if (segment_of[in] != static_cast<int>(si) && layout_id[group_of[in]] != layout_id[gi])
              continue;
            const auto kind = conversion(layout[in].output, layout[op].input);
            if (!kind || std::find(converted.begin(), converted.end(),
                                   std::make_pair(in, layout[op].input)) != converted.end())
              continue;
            converted.emplace_back(in, layout[op].input);
            exchanges.emplace_back(*kind, m.output_bytes(in) * n);
          }
          if (const auto x = forward_exchange(op)) exchanges.push_back(*x);
        }
      }
      for (int r = 0; r < replicas(gi); ++r)
        for (int mb = 0; mb < M(); ++mb) {
          std::vector<int> last;  // what the backward passes wait for
          for (std::size_t j : replica_members(gi, r)) last.push_back(rerun[si][j][mb]);
          for (const auto& [kind, bytes] : exchanges) {
            const int t = split_collective(gi, r, mb, kind, bytes);
            for (int x : last) g.add_edge(x, t);
            last = {t};
          }
          for (int op : seg)
            for (std::size_t j : replica_members(gi, r))
              for (int x : last) g.add_edge(x, bwd[op][j][mb]);
        }
    }
  }

  // A collective over the devices of replica r of split group gi at their tensor shares, for
  // micro-batch mb, of `bytes` for the whole micro-batch (the replica moves its share of them);
  // free for a replica of one device.
  int split_collective(int gi, int r, int mb, cost::Collective kind, double bytes) {
    const auto& grp = p.op_groups[gi];
    std::vector<int> devices;
    std::vector<double> shares;
    const auto members = replica_members(gi, r);
    for (std::size_t j : members) {
      devices.push_back(grp.devices[j]);
      shares.push_back(plan::tensor_share(grp, j));
    }
    const double part = bytes * plan::group_share(grp, members.front());
    return add_transfer(
        TaskKind::tp_comm, lane_of_device[devices[0]], -1, gi, mb,
        devices.size() < 2 ? cost::CollectiveCost{} : collective(kind, devices, part, shares));
  }

  // Waits for op's pass `pass` of micro-batch mb on every device of replica r of its group.
  void after_all(int op, const std::vector<std::vector<int>>& pass, int r, int mb, int task) {
    for (std::size_t j : replica_members(group_of[op], r)) g.add_edge(pass[j][mb], task);
  }

  // The collective, and its bytes for a whole micro-batch, that op `op` of a split group runs
  // after its forward pass: its experts' tokens by all-to-all (and back in the backward pass), a
  // vocabulary-split loss's per-token maxima and sums by all-reduce; nullopt for other ops.
  std::optional<std::pair<cost::Collective, double>> forward_exchange(int op) const {
    const model::Op& o = m.ops[op];
    const double n = batch() / M();
    if (o.shard == model::ShardKind::expert)
      return std::make_pair(cost::Collective::all_to_all, 2 * o.bytes_read * n);
    if (o.shard == model::ShardKind::vocab && o.kind == model::OpKind::cross_entropy)
      return std::make_pair(cost::Collective::all_reduce, 2 * o.bytes_written * n);
    return std::nullopt;
  }

  // The collectives an op of a split group needs beyond layout conversions (as the stage lowering
  // charges them): experts move their tokens to and from their devices by all-to-all in each
  // pass; a loss split by vocabulary all-reduces its per-token maxima and sums.
  void add_split_op_collectives(int op) {
    const auto exchange = forward_exchange(op);
    if (!exchange) return;
    const int gi = group_of[op];
    const bool back = m.ops[op].shard == model::ShardKind::expert;  // the tokens come back
    for (int r = 0; r < replicas(gi); ++r)
      for (int mb = 0; mb < M(); ++mb) {
        int& after_fwd = post_fwd[op][r][mb];
        int& after_bwd = post_bwd[op][r][mb];
        after_fwd = split_collective(gi, r, mb, exchange->first, exchange->second);
        if (back) after_bwd = split_collective(gi, r, mb, exchange->first, exchange->second);
        after_all(op, fwd[op], r, mb, after_fwd);
        for (std::size_t j : replica_members(gi, r)) g.add_edge(after_fwd, bwd[op][j][mb]);
        if (after_bwd >= 0) after_all(op, bwd[op], r, mb, after_bwd);
      }
  }

  // An edge from op `in` to op `op` inside split group gi: where the producer's output layout is
  // not what the consumer reads, a collective over each replica converts it (once per producer
  // and layout read); where the consumer's input gradient is not what the producer needs, another
  // converts it back.
  void add_split_edge(int in, int op, std::map<std::pair<int, Layout>, std::vector<int>>& reads) {
    const int gi = group_of[op];
    const double bytes = m.output_bytes(in) * batch() / M();
    const Layout from = layout[in].output, to = layout[op].input;
    const auto forward_kind = conversion(from, to);
    const auto backward_kind = conversion(layout[op].input_grad, gradient_layout(from));
    auto& conv = reads[{in, to}];  // per replica and micro-batch
    const bool first_reader = conv.empty();
    for (int r = 0; r < replicas(gi); ++r) {
      const auto members = replica_members(gi, r);
      for (int mb = 0; mb < M(); ++mb) {
        if (forward_kind) {
          if (first_reader) {
            conv.push_back(split_collective(gi, r, mb, *forward_kind, bytes));
            for (std::size_t j : members) g.add_edge(output_ready(in, j, mb), conv.back());
          }
          const int t = conv[static_cast<std::size_t>(r * M() + mb)];
          for (std::size_t k : members) g.add_edge(t, fwd[op][k][mb]);
        } else {
          for (std::size_t j : members) g.add_edge(output_ready(in, j, mb), fwd[op][j][mb]);
        }
        if (backward_kind) {
          const int t = split_collective(gi, r, mb, *backward_kind, bytes);
          for (std::size_t k : members) g.add_edge(input_grads_ready(op, k, mb), t);
          for (std::size_t j : members) g.add_edge(t, grad_arrival(in, j, mb));
        } else {
          for (std::size_t j : members)
            g.add_edge(input_grads_ready(op, j, mb), grad_arrival(in, j, mb));
        }
      }
    }
  }

  // Op `in` of a split group leaves it: converted to replicated first where its layout is not
  // (every device of each replica then holds all of the replica's), and its gradient, which comes
  // back to each device for its share's samples, gathered on every device of the replica before
  // the backward pass. Per replica and micro-batch: the task after which its devices may send (-1:
  // their own forward passes) and the one their backward passes wait for.
  void add_split_exit(int in) {
    const int gi = group_of[in];
    const double bytes = m.output_bytes(in) * batch() / M();
    const auto kind = conversion(layout[in].output, Layout::replicated);
    for (int r = 0; r < replicas(gi); ++r)
      for (int mb = 0; mb < M(); ++mb) {
        int out = -1;
        if (kind) {
          out = split_collective(gi, r, mb, *kind, bytes);
          for (std::size_t j : replica_members(gi, r)) g.add_edge(output_ready(in, j, mb), out);
        }
        exit_fwd[{in, r, mb}] = out;
        const int back = split_collective(gi, r, mb, cost::Collective::all_gather, bytes);
        for (std::size_t j : replica_members(gi, r)) g.add_edge(back, grad_arrival(in, j, mb));
        exit_bwd[{in, r, mb}] = back;
      }
  }

  // The activation of op `in` consumed by ops of group `gc` (or of groups on its devices at its
  // shares): from each producing device to each consuming one, the samples their intervals share
  // (nothing moves within a device); the gradients, summed on each consuming device, go back the
  // same way. A split group's devices each send their share's interval of their replica's samples
  // (after the exit conversion) and each receive all of their replica's (only their feature share
  // where every consumer reads feature shards).
  void add_crossing(int in, int gc, const std::vector<int>& consumers) {
    const int gp = group_of[in];
    const auto& from = p.op_groups[gp];
    const auto& to = p.op_groups[gc];
    const double per_sample = m.output_bytes(in);
    const bool split_from = is_split(gp), split_to = is_split(gc);
    if (split_from && !exit_bwd.count({in, 0, 0})) add_split_exit(in);
    bool feature_only = split_to;
    for (int op : consumers) feature_only = feature_only && layout[op].input == Layout::feature;
    for (std::size_t j = 0; j < from.devices.size(); ++j) {
      const auto [a0, a1] = sends[gp][j];
      const int rj = replica(gp, j);
      for (std::size_t k = 0; k < to.devices.size(); ++k) {
        const auto [b0, b1] = holds[gc][k];
        const double overlap = std::min(a1, b1) - std::max(a0, b0);
        if (overlap <= 1e-12) continue;
        const int src = from.devices[j], dst = to.devices[k];
        const double part = feature_only ? plan::tensor_share(to, k) : 1.0;
        for (int mb = 0; mb < M(); ++mb) {
          const int exit = split_from ? exit_fwd[{in, rj, mb}] : -1;
          const int ready = exit >= 0 ? exit : output_ready(in, j, mb);
          const int grads_back = split_from ? exit_bwd[{in, rj, mb}] : grad_arrival(in, j, mb);
          if (src == dst) {
            for (int op : consumers) {
              g.add_edge(ready, fwd[op][k][mb]);
              g.add_edge(input_grads_ready(op, k, mb), grads_back);
            }
            continue;
          }
          const double bytes = per_sample * overlap * part * batch() / M();
          const cost::CollectiveCost& cc = p2p(src, dst, bytes);
          const int tf =
              add_transfer(TaskKind::p2p, lane_of_device[src], lane_of_device[dst], gc, mb, cc);
          g.add_edge(ready, tf);
          const cost::CollectiveCost& back = p2p(dst, src, bytes);
          const int tb =
              add_transfer(TaskKind::p2p, lane_of_device[dst], lane_of_device[src], gp, mb, back);
          g.add_edge(tb, grads_back);
          for (int op : consumers) {
            g.add_edge(tf, fwd[op][k][mb]);
            g.add_edge(input_grads_ready(op, k, mb), tb);
          }
        }
      }
    }
  }

  void add_data_edges() {
    // Groups on the same devices at the same shares in the same mode receive an activation once:
    // each group's first such group stands for them. (Split groups laid out alike, layout_id,
    // pass activations as one group and do not cross at all.)
    std::vector<int> layout_of(p.op_groups.size());
    for (std::size_t gi = 0; gi < p.op_groups.size(); ++gi) {
      layout_of[gi] = static_cast<int>(gi);
      for (std::size_t o = 0; o < gi; ++o)
        if (p.op_groups[o].devices == p.op_groups[gi].devices && sends[o] == sends[gi] &&
            holds[o] == holds[gi] &&
            is_split(static_cast<int>(o)) == is_split(static_cast<int>(gi))) {
          layout_of[gi] = static_cast<int>(o);
          break;
        }
    }
    // Consumers of each producer, by the layout consuming it (ascending op order).
    std::map<std::pair<int, int>, std::vector<int>> crossing;  // (producer, layout) -> consumers
    std::map<std::pair<int, Layout>, std::vector<int>> reads;  // split groups' conversions
    for (std::size_t op = 0; op < m.ops.size(); ++op) {
      const int gc = group_of[op];
      for (int in : m.ops[op].inputs) {
        if (layout_id[group_of[in]] != layout_id[gc]) {
          auto& v = crossing[{in, layout_of[gc]}];
          if (v.empty() || v.back() != static_cast<int>(op)) v.push_back(static_cast<int>(op));
          continue;
        }
        if (is_split(gc)) {
          add_split_edge(in, static_cast<int>(op), reads);
          continue;
        }
        for (std::size_t j = 0; j < fwd[op].size(); ++j)
          for (int mb = 0; mb < M(); ++mb) {
            g.add_edge(fwd[in][j][mb], fwd[op][j][mb]);
            g.add_edge(bwd[op][j][mb], grad_arrival(in, j, mb));
          }
      }
    }
    for (const auto& [key, consumers] : crossing) add_crossing(key.first, key.second, consumers);
  }

  // The optimizer steps of `ops` on device j of their group over `shard` of each one's weights
  // (times the op's own share of them in a split group).
  double optimizer_time(std::size_t j, const std::vector<int>& ops, double shard) const {
    double t = 0;
    for (int op : ops) {
      const int device = p.op_groups[group_of[op]].devices[j];
      if (optimizer_index[op] >= 0)
        t += device_time(device, tg.optimizer[optimizer_index[op]], 1.0,
                         shard * weight_shard(op, j));
      if (copies_table(op, j) && optimizer_index[tied->second] >= 0)  // the table's copy
        t += device_time(device, tg.optimizer[optimizer_index[tied->second]], 1.0,
                         shard * weight_shard(op, j));
    }
    return t;
  }

  // The parameters op `op`'s group holds for it: its own, and a tied head's copy of its table.
  double own_params(int op) const {
    return static_cast<double>(m.ops[op].params +
                               (tied && op == tied->first ? m.ops[op].tied_params : 0));
  }

  // Whether device j of op `op`'s group holds a copy of the table for it: a tied head's, where
  // the device is not one of the table's group (whose table the head reads there).
  bool copies_table(int op, std::size_t j) const {
    if (!tied || op != tied->first) return false;
    const auto& table = p.op_groups[group_of[tied->second]].devices;
    return std::find(table.begin(), table.end(), p.op_groups[group_of[op]].devices[j]) ==
           table.end();
  }

  // The parameters of `ops` that device j of their group holds.
  double params_held(const std::vector<int>& ops, std::size_t j) const {
    double x = 0;
    for (int op : ops)
      x += static_cast<double>(m.ops[op].params +
                               (copies_table(op, j) ? m.ops[op].tied_params : 0)) *
           weight_shard(op, j);
    return x;
  }

  // A task that waits for every device's backward passes over the weights of `ops`.
  void after_backward(const std::vector<int>& ops, int task) {
    for (int op : ops) {
      const auto& per_device = bwd[op];
      for (const auto& per_mb : per_device)
        for (int t : per_mb) g.add_edge(t, task);
    }
  }

  double params_of(const std::vector<int>& ops) const {
    double x = 0;
    for (int op : ops) x += own_params(op);
    return x;
  }

  // How a replicated group's weights other than those sufficient factors carry are synchronised;
  // groups that agree share gradient buckets, as a data-parallel framework fuses a model's.
  struct SyncClass {
    std::vector<int> devices;  // all-reduce: the ring order; parameter server: servers first
    plan::SyncMethod method = plan::SyncMethod::all_reduce;
    cost::Algorithm algorithm = cost::Algorithm::automatic;
    std::vector<double> ps_shares;  // parameter server: each server's share of the weights
    auto operator<=>(const SyncClass&) const = default;
  };

  SyncClass sync_class(const plan::OpGroup& grp) const {
    SyncClass k;
    k.method =
        grp.sync == plan::SyncMethod::parameter_server ? grp.sync : plan::SyncMethod::all_reduce;
    if (k.method == plan::SyncMethod::all_reduce) {
      k.devices = grp.devices;
      k.algorithm = grp.algorithm;
      return k;
    }
    std::vector<int> servers = grp.servers;
    if (servers.empty()) servers.push_back(grp.devices[0]);
    k.devices = servers;
    for (int d : grp.devices)
      if (std::find(servers.begin(), servers.end(), d) == servers.end()) k.devices.push_back(d);
    if (servers.size() > 1) {
      k.ps_shares.assign(k.devices.size(), 0.0);
      for (std::size_t i = 0; i < servers.size(); ++i)
        k.ps_shares[i] = 1.0 / static_cast<double>(servers.size());
    }
    return k;
  }

  // Per synchronisation, the ops whose weights it sums and the part of each op's weights.
  using SyncClasses = std::map<SyncClass, std::vector<std::pair<int, double>>>;

  // The replicas of split group gi sum the gradients of `ops`: where all split alike (the same
  // sizes and tensor shares in increasing device order), device q of each replica with device q of
  // the others, over the slices it holds; otherwise every device of the group over the whole
  // weights (its slices in place, zeros elsewhere), as the runtime does.
  void add_replica_sync(int gi, const std::vector<int>& ops, SyncClasses& classes) const {
    const auto& grp = p.op_groups[gi];
    const auto& at = places_of[static_cast<std::size_t>(gi)];
    // (With parameter servers: the first device of each place, the first replica's, or of the
    // group serves.)
    const plan::SyncMethod method =
        grp.sync == plan::SyncMethod::parameter_server ? grp.sync : plan::SyncMethod::all_reduce;
    if (at.empty()) {
      SyncClass k;
      k.method = method;
      k.devices = grp.devices;
      for (int op : ops) classes[k].emplace_back(op, 1.0);
      return;
    }
    for (const auto& place : at) {
      SyncClass k;
      k.method = method;
      for (std::size_t j : place) k.devices.push_back(grp.devices[j]);
      for (int op : ops) classes[k].emplace_back(op, weight_shard(op, place[0]));
    }
  }

  // The bytes of the sufficient factors of `ops` per sample on device j of their group: every
  // row's input and output gradient over the features device j reads and writes (a column split
  // holds a slice of the n output features, a row split of the k input features).
  double factor_bytes(const std::vector<int>& ops, std::size_t j) const {
    double bytes = 0;
    for (int op : ops) {
      const model::Op& o = m.ops[op];
      const double share = shard(op, j);
      double k = static_cast<double>(o.gemm.k), n = static_cast<double>(o.gemm.n);
      (o.shard == model::ShardKind::row ? k : n) *= share;
      bytes += static_cast<double>(o.gemm.batch_count * o.gemm.m) * (k + n) * param_bytes();
    }
    return bytes;
  }

  // The replicas of split group gi sum the gradients of `ops` by sufficient factors, as the stage
  // lowering prices a stage of tensor-parallel replicas: where they split alike, the devices at
  // each place all-gather their factors for their replicas' samples; otherwise every device of
  // the group gathers every device's. Each device then rebuilds its slice of the gradients over
  // the other replicas' samples (the weight-gradient GEMM, its own it computed) before its
  // optimizer step (`waits`, per device of the group), holding the factors until then.
  void add_split_factors(int gi, const std::vector<int>& ops, std::vector<std::vector<int>>& waits,
                         Bytes base_buffers) {
    const auto& grp = p.op_groups[gi];
    std::vector<std::vector<std::size_t>> gathers = places_of[static_cast<std::size_t>(gi)];
    if (gathers.empty()) {
      gathers.emplace_back();
      for (std::size_t j = 0; j < grp.devices.size(); ++j) gathers.back().push_back(j);
    }
    for (const auto& members : gathers) {
      std::vector<int> devices;
      std::vector<double> contribution;
      double total = 0;
      for (std::size_t j : members) {
        devices.push_back(grp.devices[j]);
        contribution.push_back(factor_bytes(ops, j) * batch() * plan::group_share(grp, j));
        total += contribution.back();
      }
      for (double& x : contribution) x /= total;
      const int gather =
          add_transfer(TaskKind::grad_sync, lane_of_device[devices[0]], -1, gi, -1,
                       collective(cost::Collective::all_gather, devices, total, contribution));
      for (int op : ops)
        for (std::size_t j : members)
          for (int t : bwd[op][j]) g.add_edge(t, gather);
      for (std::size_t j : members) {
        const int d = grp.devices[j];
        const double others = batch() * (1.0 - plan::group_share(grp, j));
        double t = 0;
        for (int op : ops) t += device_time(d, tg.forward[op], others, shard(op, j));
        const int rebuild = add_task(compute_task(TaskKind::grad_rebuild, d, gi, -1, t));
        g.add_edge(gather, rebuild);
        waits[j].push_back(rebuild);
        fixed_memory[d].buffers = max(fixed_memory[d].buffers, base_buffers + Bytes(total));
      }
    }
  }

  // Gradient synchronisation and optimizer steps of every group, and each device's fixed memory.
  // A replicated group's weights are all-reduced, or pushed to and pulled from parameter servers
  // (servers hold their shard of the weights with its optimizer states and step it once every
  // device has pushed; the pull is priced with the push), in gradient buckets of the plan's
  // grad_bucket_bytes (sim/gradient_buckets.h) filled in backward order over every group of the
  // same devices and synchronisation, each bucket's transfer starting once the backward passes over
  // its weights are done. Sufficient factors are gathered per group and rebuilt on every device.
  void add_updates() {
    const cost::StateBytes sb = cost::state_bytes(m.dtype);
    fixed_memory.assign(c.devices.size(), cost::MemoryBreakdown{});
    const cost::MemoryConfig defaults;
    const Bytes base_buffers = defaults.gradient_buckets;
    for (std::size_t d = 0; d < c.devices.size(); ++d)
      if (lane_of_device[d] >= 0) {
        fixed_memory[d].buffers = base_buffers;
        fixed_memory[d].reserve = defaults.context + defaults.workspace;
      }
    std::vector<std::vector<int>> param_ops(p.op_groups.size());
    for (std::size_t op = 0; op < m.ops.size(); ++op)
      if (own_params(static_cast<int>(op)) > 0)
        param_ops[group_of[op]].push_back(static_cast<int>(op));
    // Per group: the tasks its optimizer steps wait for, per device of the group.
    std::vector<std::vector<std::vector<int>>> waits(p.op_groups.size());
    SyncClasses classes;
    std::vector<std::vector<int>> bucket_tasks(m.ops.size());  // per op, its buckets' transfers
    for (std::size_t gi = 0; gi < p.op_groups.size(); ++gi) {
      const auto& grp = p.op_groups[gi];
      const auto& ops = param_ops[gi];
      const std::size_t n = grp.devices.size();
      waits[gi].assign(n, {});
      if (ops.empty()) continue;
      for (std::size_t j = 0; j < n; ++j) {
        const double params = params_held(ops, j);
        fixed_memory[grp.devices[j]].parameters += Bytes(params * sb.weight);
        fixed_memory[grp.devices[j]].gradients += Bytes(params * sb.gradient);
      }
      if (is_split(static_cast<int>(gi)) ? replicas(static_cast<int>(gi)) < 2 : n == 1) continue;
      std::vector<int> factor_ops, reduced;
      // (A table apart from its tied head is summed with the head's copy below; a tied head's own
      // weights are all-reduced, as the runtime does.)
      for (int op : ops)
        if (m.ops[op].params > 0 && !(tied && op == tied->second))
          (grp.sync == plan::SyncMethod::sufficient_factor && m.ops[op].tied_params == 0 &&
                   sufficient_factor_applies(m.ops[op], plan::SplitKind::tensor)
               ? factor_ops
               : reduced)
              .push_back(op);
      if (is_split(static_cast<int>(gi))) {
        add_replica_sync(static_cast<int>(gi), reduced, classes);
        if (!factor_ops.empty())
          add_split_factors(static_cast<int>(gi), factor_ops, waits[gi], base_buffers);
        continue;
      }
      auto& in_class = classes[sync_class(grp)];
      for (int op : reduced) in_class.emplace_back(op, 1.0);
      if (factor_ops.empty()) continue;
      // Every device gathers the other devices' factors for their samples (each sample's input
      // and output-gradient rows), then rebuilds the whole gradient: the weight-gradient GEMM over
      // the other devices' samples (its own it computed), holding the factors until then.
      double per_sample = 0;
      for (int op : factor_ops) {
        const model::Op& o = m.ops[op];
        per_sample += static_cast<double>(o.gemm.batch_count * o.gemm.m) *
                      static_cast<double>(o.gemm.k + o.gemm.n) * param_bytes();
      }
      const int gather = add_transfer(
          TaskKind::grad_sync, lane_of_device[grp.devices[0]], -1, static_cast<int>(gi), -1,
          collective(cost::Collective::all_gather, grp.devices, per_sample * batch(), grp.shares));
      after_backward(factor_ops, gather);
      for (std::size_t j = 0; j < n; ++j) {
        const int d = grp.devices[j];
        const double others = batch() * (1.0 - plan::group_share(grp, j));
        double t = 0;
        for (int op : factor_ops) t += device_time(d, tg.forward[op], others);
        const int rebuild =
            add_task(compute_task(TaskKind::grad_rebuild, d, static_cast<int>(gi), -1, t));
        g.add_edge(gather, rebuild);
        waits[gi][j].push_back(rebuild);
        fixed_memory[d].buffers =
            max(fixed_memory[d].buffers, base_buffers + Bytes(per_sample * batch()));
      }
    }
    if (tied) {
      // The table's copies in the two groups sum their gradients over both groups' devices in
      // the whole layout, as the runtime does, once every backward pass over them is done and
      // before either group steps.
      const int head = tied->first, table = tied->second;
      std::vector<int> devices;  // (a device of both groups holds one table)
      for (int op : {table, head})
        for (int d : p.op_groups[group_of[op]].devices)
          if (std::find(devices.begin(), devices.end(), d) == devices.end()) devices.push_back(d);
      const int t =
          add_transfer(TaskKind::grad_sync, lane_of_device[devices[0]], -1, group_of[table], -1,
                       collective(cost::Collective::all_reduce, devices,
                                  static_cast<double>(m.ops[head].tied_params) * param_bytes()));
      after_backward({table, head}, t);
      for (int op : {table, head})
        for (auto& w : waits[group_of[op]]) w.push_back(t);
    }
    for (auto& [key, ops] : classes) {
      std::sort(ops.begin(), ops.end());
      std::vector<double> bytes;
      for (auto [op, part] : ops)
        bytes.push_back(static_cast<double>(m.ops[op].params) * part * param_bytes());
      const cost::Collective kind = key.method == plan::SyncMethod::parameter_server
                                        ? cost::Collective::ps_push_pull
                                        : cost::Collective::all_reduce;
      for (auto [first, count] : gradient_buckets(bytes, p.grad_bucket_bytes)) {
        std::vector<int> bucket;
        double sum = 0;
        for (int i = first; i < first + count; ++i) {
          bucket.push_back(ops[static_cast<std::size_t>(i)].first);
          sum += bytes[static_cast<std::size_t>(i)];
        }
        const int t = add_transfer(
            TaskKind::grad_sync, lane_of_device[key.devices[0]], -1, group_of[bucket[0]], -1,
            collective(kind, key.devices, sum, key.ps_shares, key.algorithm));
        after_backward(bucket, t);
        for (int op : bucket) bucket_tasks[op].push_back(t);
      }
    }
    for (std::size_t gi = 0; gi < p.op_groups.size(); ++gi) {
      const auto& grp = p.op_groups[gi];
      const auto& ops = param_ops[gi];
      if (ops.empty()) continue;
      const int group = static_cast<int>(gi);
      std::vector<int> synced;
      for (int op : ops)
        for (int t : bucket_tasks[op])
          if (std::find(synced.begin(), synced.end(), t) == synced.end()) synced.push_back(t);
      // (A split group's servers send the sums back and every device steps its slices.)
      const bool ps = grp.devices.size() > 1 && grp.sync == plan::SyncMethod::parameter_server &&
                      !is_split(group);
      const std::vector<int> servers =
          grp.servers.empty() ? std::vector<int>{grp.devices[0]} : grp.servers;
      // ZeRO-1: each device of a replicated group (whose devices all hold the summed gradients)
      // keeps the optimizer states of 1/n of the group's weights and steps them; the updated
      // weights are then all-gathered. In a split group of replicas that split alike, the devices
      // at each place do so over the slices they hold.
      const auto& at = places_of[gi];
      const bool zero = p.zero_stage == 1 && plan::zero_shards(grp);
      const double shard =
          ps     ? 1.0 / static_cast<double>(servers.size())
          : zero ? 1.0 / static_cast<double>(is_split(group) ? replicas(group) : grp.devices.size())
                 : 1.0;
      std::vector<int> steps;
      for (std::size_t j = 0; j < grp.devices.size(); ++j) {
        const int d = grp.devices[j];
        if (ps && std::find(servers.begin(), servers.end(), d) == servers.end()) continue;
        const int t = add_task(
            compute_task(TaskKind::optimizer, d, group, -1, optimizer_time(j, ops, shard)));
        steps.push_back(t);
        // Its own backward passes (the synchronisation waits for every device's).
        for (int op : ops)
          for (int x : bwd[op][j]) g.add_edge(x, t);
        for (int x : synced) g.add_edge(x, t);
        for (int x : waits[gi][j]) g.add_edge(x, t);
        fixed_memory[d].optimizer += Bytes(params_held(ops, j) * shard * sb.optimizer);
      }
      if (zero && !is_split(group)) {
        const int gather =
            add_transfer(TaskKind::param_gather, lane_of_device[grp.devices[0]], -1, group, -1,
                         collective(cost::Collective::all_gather, grp.devices,
                                    params_of(ops) * param_bytes(), {}));
        for (int t : steps) g.add_edge(t, gather);
      }
      for (std::size_t q = 0; zero && q < at.size(); ++q) {  // each place's slices
        std::vector<int> devices;
        for (std::size_t j : at[q]) devices.push_back(grp.devices[j]);
        const int gather =
            add_transfer(TaskKind::param_gather, lane_of_device[devices[0]], -1, group, -1,
                         collective(cost::Collective::all_gather, devices,
                                    params_held(ops, at[q][0]) * param_bytes(), {}));
        for (int t : steps) g.add_edge(t, gather);
      }
    }
  }

  // HEFT's upward rank of every task (compute at its duration, a transfer at its standalone
  // time): a dynamic stream runs the highest first, within the earliest micro-batch. FIFO leaves
  // every key at 0.
  void order_tasks() {
    if (p.execution_order != plan::ExecutionOrder::heft) return;
    std::vector<std::vector<int>> succs(g.tasks.size());
    std::vector<double> cost(g.tasks.size());
    for (const detail::Edge& e : g.edges) succs[e.from].push_back(e.to);
    for (std::size_t t = 0; t < g.tasks.size(); ++t)
      cost[t] = g.tasks[t].duration + g.tasks[t].latency;
    const std::vector<double> rank = upward_ranks(succs, cost);
    // Earlier micro-batches first (a device finishes one's backward pass before it starts the
    // next one's forward, as 1F1B does, so that it holds one micro-batch's activations rather than
    // all), then by rank; optimizer steps (no micro-batch) last.
    const double span = *std::max_element(rank.begin(), rank.end()) + 1;
    for (std::size_t t = 0; t < g.tasks.size(); ++t) {
      const int mb = g.tasks[t].microbatch < 0 ? M() : g.tasks[t].microbatch;
      g.tasks[t].order_key = mb * span - rank[t];
    }
  }

  void build() {
    index_training_graph();
    group_of = plan::group_of_ops(p, m);
    tied = plan::tied_ops_apart(m, group_of);
    segments = plan::recompute_segments(m, group_of, p.recompute);
    segment_of.assign(m.ops.size(), -1);
    for (std::size_t s = 0; s < segments.size(); ++s)
      for (int op : segments[s]) segment_of[static_cast<std::size_t>(op)] = static_cast<int>(s);
    compute_host_stretch();
    build_lanes();
    add_passes();
    add_data_edges();
    add_updates();
    order_tasks();
    // Each transfer spends the CPU quotas of the devices at its links' ends.
    transfer_ends = transfer_lanes(g, c, lanes);
    if (!g.quotas.empty())
      for (std::size_t t = 0; t < g.tasks.size(); ++t)
        for (int l : transfer_ends[t])
          if (lane_quota[l] >= 0) g.add_quota(static_cast<int>(t), lane_quota[l]);
  }
};

}  // namespace

Result<SimResult> simulate_op_level(const model::Model& m, const cluster::Cluster& c,
                                    const plan::Plan& p, const SimOptions& opts) {
  OpLevelLowering low(m, c, p, opts);
  low.build();
  const std::vector<double> caps = cost::link_rates(c, opts.network);
  // (Under CPU quotas: the steady state of iterations back to back; statistics are means, and the
  // memory timeline the last iteration's.)
  const IterationRuns runs =
      run_iterations(low.g, caps, low.lanes, low.transfer_ends, c.num_devices());
  const EngineResult& eng = runs.last;
  if (eng.deadlock)
    return Error{
        "plan: op_groups: the op-level plan's tasks wait on each other (the simulation "
        "deadlocked)"};
  SimResult r;
  r.iteration_time = Seconds(runs.iteration_time + between_steps_time(low.compute, c, low.lanes));
  r.num_tasks = static_cast<long long>(low.g.tasks.size());
  r.num_events = runs.events;
  r.lanes = low.lanes;
  const auto& busy = runs.busy;
  const double measured = static_cast<double>(runs.measured);
  r.devices.resize(c.devices.size());
  for (std::size_t d = 0; d < c.devices.size(); ++d) {
    auto& ds = r.devices[d];
    ds.device = static_cast<int>(d);
    ds.capacity = c.type_of(static_cast<int>(d)).memory;
    ds.lane = low.lane_of_device[d];
    ds.compute_busy = Seconds(busy[d].compute / measured);
    ds.comm_busy = Seconds(busy[d].comm / measured);
    ds.idle = Seconds(std::max(0.0, r.iteration_time.value - busy[d].either / measured));
  }
  // Activations over the run: a forward pass keeps its saved bytes from its end until its
  // backward pass ends; a loss's backward pass holds its transient buffers while it runs (at equal
  // times, what is freed goes first). Per change: time, activation bytes, transient bytes.
  std::vector<std::vector<std::tuple<double, double, double>>> changes(low.lanes.size());
  for (std::size_t t = 0; t < low.g.tasks.size(); ++t) {
    auto& ch = changes[low.g.tasks[t].lane];
    if (low.activation_delta[t] != 0) ch.emplace_back(eng.end[t], low.activation_delta[t], 0.0);
    if (low.transient[t] > 0) {
      ch.emplace_back(eng.start[t], 0.0, low.transient[t]);
      ch.emplace_back(eng.end[t], 0.0, -low.transient[t]);
    }
  }
  for (std::size_t l = 0; l < low.lanes.size(); ++l) {
    auto& ch = changes[l];
    std::sort(ch.begin(), ch.end(), [](const auto& a, const auto& b) {
      if (std::get<0>(a) != std::get<0>(b)) return std::get<0>(a) < std::get<0>(b);
      return std::get<1>(a) + std::get<2>(a) < std::get<1>(b) + std::get<2>(b);
    });
    double act = 0, held = 0, peak = 0, peak_held = 0;
    for (const auto& [time, delta, transient] : ch) {
      act += delta;
      held += delta + transient;
      peak = std::max(peak, act);
      peak_held = std::max(peak_held, held);
    }
    const int d = low.lanes[l].devices[0];
    auto& ds = r.devices[d];
    ds.memory = low.fixed_memory[d];
    ds.memory.activations = Bytes(peak);
    ds.memory.transient = Bytes(peak_held - peak);
    ds.memory.fragmentation =
        cost::allocator_fragmentation(ds.memory, cost::MemoryConfig{}.fragmentation);
    ds.peak_memory = ds.memory.total();
    ds.fits = ds.peak_memory <= ds.capacity;
  }
  if (opts.record_events)
    for (std::size_t t = 0; t < low.g.tasks.size(); ++t) {
      const Task& task = low.g.tasks[t];
      r.events.push_back(TaskRecord{task.kind, task.lane, task.peer_lane, task.stage,
                                    task.microbatch, task.bucket, Seconds(eng.start[t]),
                                    Seconds(eng.end[t])});
    }
  summarise(m, c, p, r);
  return r;
}

}  // namespace hetplan::sim::detail
