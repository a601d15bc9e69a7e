#include "hetplan/plan/op_groups.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>
#include <utility>

#include "hetplan/core/error.h"
#include "hetplan/cost/memory_cost.h"

namespace hetplan::plan {

std::vector<int> group_of_ops(const Plan& p, const model::Model& m) {
  std::vector<int> out(m.ops.size(), -1);
  std::unordered_map<std::string_view, int> by_name;
  for (std::size_t i = 0; i < m.ops.size(); ++i)
    by_name.emplace(m.ops[i].name, static_cast<int>(i));
  std::vector<std::pair<int, const std::string*>> patterns;  // (group, pattern) with a '*'
  for (std::size_t g = 0; g < p.op_groups.size(); ++g)
    for (const std::string& name : p.op_groups[g].ops) {
      if (name.find('*') != std::string::npos) {
        patterns.emplace_back(static_cast<int>(g), &name);
        continue;
      }
      auto it = by_name.find(name);
      if (it != by_name.end() && out[it->second] < 0) out[it->second] = static_cast<int>(g);
    }
  if (patterns.empty()) return out;
  for (std::size_t i = 0; i < m.ops.size(); ++i)
    for (const auto& [g, pattern] : patterns) {
      if (out[i] >= 0) break;
      if (op_pattern_matches(*pattern, m.ops[i].name)) out[i] = g;
    }
  return out;
}

std::optional<std::pair<int, int>> tied_ops_apart(const model::Model& m,
                                                  const std::vector<int>& group_of_op) {
  const int table = m.tied_owner(), head = m.tied_reader();
  if (table < 0 || head < 0 ||
      group_of_op[static_cast<std::size_t>(table)] == group_of_op[static_cast<std::size_t>(head)])
    return std::nullopt;
  return std::make_pair(head, table);
}

std::vector<std::vector<int>> recompute_segments(const model::Model& m,
                                                 const std::vector<int>& group_of_op,
                                                 cost::Recompute r) {
  std::vector<std::vector<int>> out;
  if (r == cost::Recompute::none) return out;
  for (const model::Layer& layer : m.layers) {
    std::map<int, std::size_t> of_group;  // group -> its segment in `out`
    for (int op = layer.first_op; op < layer.first_op + layer.num_ops; ++op) {
      if (!cost::recomputes(r, m, m.ops[static_cast<std::size_t>(op)])) continue;
      const auto [it, added] =
          of_group.emplace(group_of_op[static_cast<std::size_t>(op)], out.size());
      if (added) out.emplace_back();
      out[it->second].push_back(op);
    }
  }
  return out;
}

std::optional<int> tied_groups_overlap(const Plan& p, const model::Model& m,
                                       const std::vector<int>& group_of_op) {
  const auto apart = tied_ops_apart(m, group_of_op);
  if (!apart) return std::nullopt;
  const OpGroup& head = p.op_groups[static_cast<std::size_t>(group_of_op[apart->first])];
  const OpGroup& table = p.op_groups[static_cast<std::size_t>(group_of_op[apart->second])];
  if ((head.mode != GroupMode::split && table.mode != GroupMode::split) ||
      same_split_layout(head, table))
    return std::nullopt;
  const auto& a = head.devices;
  const auto& b = table.devices;
  for (int d : a)
    if (std::find(b.begin(), b.end(), d) != b.end()) return d;
  return std::nullopt;
}

std::string tied_overlap_message(const model::Model& m, const std::vector<int>& group_of_op,
                                 int device) {
  const int head = m.tied_reader(), table = m.tied_owner();
  return fmt::format(
      "the tied LM head \"{}\" (op_groups[{}]) and the table it reads \"{}\" (op_groups[{}]) "
      "share device {}, and one of them is split (expected one group, groups on disjoint "
      "devices, or groups that are not split or laid out alike: a device holds one table, whole "
      "or its vocabulary rows, and the copies sum their gradients)",
      m.ops[static_cast<std::size_t>(head)].name, group_of_op[static_cast<std::size_t>(head)],
      m.ops[static_cast<std::size_t>(table)].name, group_of_op[static_cast<std::size_t>(table)],
      device);
}

int replica_count(const OpGroup& g) {
  if (g.mode != GroupMode::split || g.replica_sizes.empty()) return 1;
  return static_cast<int>(g.replica_sizes.size());
}

int replica_of(const OpGroup& g, std::size_t j) {
  if (g.mode != GroupMode::split) return 0;
  int r = 0;
  for (std::size_t end = 0; r < static_cast<int>(g.replica_sizes.size()); ++r) {
    end += static_cast<std::size_t>(g.replica_sizes[static_cast<std::size_t>(r)]);
    if (j < end) return r;
  }
  return 0;
}

std::size_t replica_begin(const OpGroup& g, int r) {
  std::size_t at = 0;
  for (int i = 0; i < r && i < static_cast<int>(g.replica_sizes.size()); ++i)
    at += static_cast<std::size_t>(g.replica_sizes[static_cast<std::size_t>(i)]);
  return at;
}

std::vector<std::size_t> replica_members(const OpGroup& g, int r) {
  // Replica r holds the places [begin, end) its size gives after those before it; places past
  // every replica's count to replica 0, as replica_of says.
  std::vector<std::size_t> out;
  if (r < 0) return out;
  const std::size_t n = g.devices.size();
  const int replicas = g.mode == GroupMode::split ? static_cast<int>(g.replica_sizes.size()) : 0;
  const std::size_t begin = replica_begin(g, std::min(r, replicas));
  const std::size_t end =
      r < replicas ? begin + static_cast<std::size_t>(g.replica_sizes[static_cast<std::size_t>(r)])
                   : begin;
  for (std::size_t j = std::min(begin, n); j < std::min(end, n); ++j) out.push_back(j);
  if (r == 0)
    for (std::size_t j = std::min(replica_begin(g, replicas), n); j < n; ++j) out.push_back(j);
  return out;
}

std::vector<std::vector<std::size_t>> replica_places(const OpGroup& g) {
  const int R = replica_count(g);
  if (g.mode != GroupMode::split || R < 2) return {};
  std::vector<std::vector<std::size_t>> members;
  for (int r = 0; r < R; ++r) {
    members.push_back(replica_members(g, r));
    std::sort(members.back().begin(), members.back().end(),
              [&](std::size_t a, std::size_t b) { return g.devices[a] < g.devices[b]; });
  }
  for (const auto& rm : members) {
    if (rm.size() != members[0].size()) return {};
    for (std::size_t q = 0; q < rm.size(); ++q)
      if (std::abs(tensor_share(g, rm[q]) - tensor_share(g, members[0][q])) >= 1e-12) return {};
  }
  std::vector<std::vector<std::size_t>> out(members[0].size());
  for (std::size_t q = 0; q < out.size(); ++q)
    for (const auto& rm : members) out[q].push_back(rm[q]);
  return out;
}

bool zero_shards(const OpGroup& g) {
  if (g.devices.size() < 2) return false;
  if (g.mode == GroupMode::split) return !replica_places(g).empty();
  return g.sync != SyncMethod::parameter_server;
}

bool same_split_layout(const OpGroup& a, const OpGroup& b) {
  if (a.mode != GroupMode::split || b.mode != GroupMode::split || a.devices != b.devices)
    return false;
  for (std::size_t j = 0; j < a.devices.size(); ++j)
    if (replica_of(a, j) != replica_of(b, j) ||
        std::abs(group_share(a, j) - group_share(b, j)) >= 1e-12 ||
        std::abs(tensor_share(a, j) - tensor_share(b, j)) >= 1e-12)
      return false;
  return true;
}

double group_share(const OpGroup& g, std::size_t j) {
  if (g.mode == GroupMode::split) {
    const int r = replica_of(g, j);
    if (!g.batch_shares.empty()) return g.batch_shares[static_cast<std::size_t>(r)];
    return 1.0 / replica_count(g);
  }
  if (g.mode != GroupMode::replicate) return 1.0;
  if (!g.shares.empty()) return g.shares[j];
  return 1.0 / static_cast<double>(g.devices.size());
}

double tensor_share(const OpGroup& g, std::size_t j) {
  if (g.mode != GroupMode::split) return 1.0;
  if (!g.shares.empty()) return g.shares[j];
  const int r = replica_of(g, j);
  const std::size_t size =
      g.replica_sizes.empty()
          ? g.devices.size()
          : static_cast<std::size_t>(g.replica_sizes[static_cast<std::size_t>(r)]);
  return 1.0 / static_cast<double>(size);
}

namespace {

// What a plan converted to the other form keeps: the model, cluster and planner strings, the
// batch, its micro-batches, the gradient buckets, batch statistics, precision, Adam step and loss;
// the rest default.
Plan same_step(const Plan& p) {
  Plan out;
  out.model = p.model;
  out.cluster = p.cluster;
  out.planner = p.planner;
  out.global_batch = p.global_batch;
  out.num_microbatches = p.num_microbatches;
  out.grad_bucket_bytes = p.grad_bucket_bytes;
  out.batch_norm = p.batch_norm;
  out.precision = p.precision;
  out.adam = p.adam;
  out.loss = p.loss;
  out.metrics = p.metrics;
  out.recompute = p.recompute;    // the same layers' (or attention cores') activations dropped
  // Op by op, a fused attention core (a stage plan's flash) keeps no less than its ops recomputed.
  if (cost::fused(p.attention) && p.recompute == cost::Recompute::none)
    out.recompute = cost::Recompute::selective;
  out.zero_stage = p.zero_stage;  // ZeRO-1: a group's or a stage's replicas shard Adam's states
  return out;
}

Result<Plan> op_level_plan_of(const Plan& p, const model::Model& m) {
  if (p.is_op_level()) return Error{"the plan is op-level already"};
  if (p.stages.empty()) return Error{"the plan has no stages"};
  if (p.zero_stage > 1)
    return Error{
        fmt::format("zero_stage: ZeRO stage {} has no op-level form (stage 1 has)", p.zero_stage)};
  if (p.sequence_parallel)
    return Error{"sequence_parallel: sequence parallelism has no op-level form"};
  for (std::size_t i = 0; i < p.grad_sync.size(); ++i)
    if (p.grad_sync[i].method == SyncMethod::none)
      return Error{fmt::format("grad_sync[{}].method: {} has no op-level form for a stage's rules",
                               i, to_string(p.grad_sync[i].method))};
  // An op's synchronisation: the first grad_sync rule naming it (the simulator's rule), else
  // all-reduce.
  auto sync_of = [&](const std::string& op) {
    for (const auto& rule : p.grad_sync)
      if (op_pattern_matches(rule.ops, op)) return rule.method;
    return SyncMethod::all_reduce;
  };
  Plan out = same_step(p);
  out.execution_order = ExecutionOrder::heft;
  for (const Stage& st : p.stages) {
    const bool tensor = std::any_of(st.replicas.begin(), st.replicas.end(),
                                    [](const Replica& r) { return r.devices.size() > 1; });
    // The stage's ops by how its replicas split them (HAP's batch programs: by batch, by tensor,
    // or computed whole on every device; on replicas of one device each the split changes
    // nothing).
    std::vector<std::string> by_tensor, by_batch, whole;
    for (int l = st.first_layer; l < st.first_layer + st.num_layers; ++l) {
      if (l < 0 || l >= static_cast<int>(m.layers.size()))
        return Error{fmt::format("stages: a stage names layer {}, which the model lacks", l)};
      const model::Layer& layer = m.layers[static_cast<std::size_t>(l)];
      for (int i = layer.first_op; i < layer.first_op + layer.num_ops; ++i) {
        const model::Op& op = m.ops[static_cast<std::size_t>(i)];
        const SplitKind split = tensor ? split_of(p, op.name) : SplitKind::tensor;
        if (split == SplitKind::batch_sharded && op.params > 0)
          return Error{fmt::format(
              "op_overrides: op \"{}\" shards its weights (batch_sharded), which has no op-level "
              "form",
              op.name)};
        (split == SplitKind::tensor      ? by_tensor
         : split == SplitKind::replicate ? whole
                                         : by_batch)
            .push_back(op.name);
      }
    }
    // A group, and the ops of it that grad_sync synchronises otherwise as further groups laid out
    // as the first: by sufficient factors, and by parameter servers (a replicated group's first
    // device serving, a split group's first replica's devices, as a stage's rule does).
    auto add = [&](OpGroup g) {
      OpGroup factors = g, served = g;
      factors.sync = SyncMethod::sufficient_factor;
      served.sync = SyncMethod::parameter_server;
      factors.ops.clear();
      served.ops.clear();
      std::vector<std::string> reduced;
      for (std::string& op : g.ops) {
        const SyncMethod method = sync_of(op);
        (method == SyncMethod::sufficient_factor  ? factors.ops
         : method == SyncMethod::parameter_server ? served.ops
                                                  : reduced)
            .push_back(std::move(op));
      }
      g.ops = std::move(reduced);
      for (OpGroup* x : {&g, &factors, &served})
        if (!x->ops.empty()) out.op_groups.push_back(std::move(*x));
    };
    if (!by_batch.empty()) {
      // Split by batch: every device of every replica runs its tensor share of the replica's
      // samples, whole weights on each, all summed.
      OpGroup b;
      b.ops = std::move(by_batch);
      for (const Replica& r : st.replicas)
        for (std::size_t j = 0; j < r.devices.size(); ++j) {
          b.devices.push_back(r.devices[j]);
          b.shares.push_back(r.batch_share * tp_share(r, j));
        }
      add(std::move(b));
    }
    if (!whole.empty()) {
      // Computed whole on every device of a replica: the same as on one of them (the one with
      // the largest tensor share), which runs the replica's samples.
      OpGroup w;
      w.ops = std::move(whole);
      for (const Replica& r : st.replicas) {
        std::size_t best = 0;
        for (std::size_t j = 1; j < r.tp_shares.size(); ++j)
          if (r.tp_shares[j] > r.tp_shares[best]) best = j;
        w.devices.push_back(r.devices[best]);
        w.shares.push_back(r.batch_share);
      }
      if (w.devices.size() == 1) {
        w.mode = GroupMode::place;
        w.shares.clear();
        out.op_groups.push_back(std::move(w));  // (one device: nothing to synchronise)
      } else {
        add(std::move(w));
      }
    }
    if (by_tensor.empty()) continue;
    OpGroup g;
    g.ops = std::move(by_tensor);
    if (st.replicas.size() == 1 && st.replicas.front().devices.size() > 1) {
      // One tensor-parallel replica: a split group at its tp_shares.
      g.mode = GroupMode::split;
      g.devices = st.replicas.front().devices;
      g.shares = st.replicas.front().tp_shares;
      out.op_groups.push_back(std::move(g));
      continue;
    }
    if (tensor) {
      // Replicas of which some split their layers: a split group of those replicas.
      bool uneven = false;
      for (const Replica& r : st.replicas) uneven = uneven || !r.tp_shares.empty();
      for (const Replica& r : st.replicas) {
        g.devices.insert(g.devices.end(), r.devices.begin(), r.devices.end());
        g.replica_sizes.push_back(static_cast<int>(r.devices.size()));
        g.batch_shares.push_back(r.batch_share);
        for (std::size_t j = 0; uneven && j < r.devices.size(); ++j)
          g.shares.push_back(tp_share(r, j));
      }
      g.mode = GroupMode::split;
    } else {
      for (const Replica& r : st.replicas) {
        g.devices.push_back(r.devices.front());
        g.shares.push_back(r.batch_share);
      }
      if (g.devices.size() == 1) {
        g.mode = GroupMode::place;
        g.shares.clear();
        out.op_groups.push_back(std::move(g));
        continue;
      }
    }
    add(std::move(g));
  }
  return out;
}

// Where a group runs its ops as a stage would: its devices in increasing order, each with its share
// of every micro-batch (one replica per device), or, for a split group, its replicas in order,
// each of its devices in increasing order with their shares of every op's tensor dimension, and
// each replica's share of every micro-batch.
struct Placement {
  std::vector<int> devices;
  std::vector<double> shares;
  bool tensor = false;
  std::vector<int> replica_sizes;    // split: of consecutive devices
  std::vector<double> batch_shares;  // split: per replica
  bool operator==(const Placement& o) const {
    auto near = [](const std::vector<double>& a, const std::vector<double>& b) {
      if (a.size() != b.size()) return false;
      for (std::size_t j = 0; j < a.size(); ++j)
        if (std::abs(a[j] - b[j]) > 1e-9) return false;
      return true;
    };
    return devices == o.devices && tensor == o.tensor && replica_sizes == o.replica_sizes &&
           near(shares, o.shares) && near(batch_shares, o.batch_shares);
  }
};

Placement placement_of(const OpGroup& g) {
  Placement out;
  out.tensor = g.mode == GroupMode::split;
  const int replicas = replica_count(g);
  for (int r = 0; r < replicas; ++r) {
    const std::size_t begin = out.tensor ? replica_begin(g, r) : 0;
    const std::size_t end =
        out.tensor && r + 1 < replicas ? replica_begin(g, r + 1) : g.devices.size();
    std::vector<std::pair<int, double>> by_device;
    for (std::size_t j = begin; j < end; ++j)
      by_device.emplace_back(g.devices[j], out.tensor ? tensor_share(g, j) : group_share(g, j));
    std::sort(by_device.begin(), by_device.end());
    for (const auto& [d, s] : by_device) {
      out.devices.push_back(d);
      out.shares.push_back(s);
    }
    if (out.tensor) {
      out.replica_sizes.push_back(static_cast<int>(end - begin));
      out.batch_shares.push_back(group_share(g, begin));
    }
  }
  return out;
}

std::string describe(const Placement& pl) {
  if (pl.devices.size() == 1) return fmt::format("device {}", pl.devices[0]);
  std::string out = fmt::format("devices {{{}}} at {}shares {:g}", fmt::join(pl.devices, ","),
                                pl.tensor ? "tensor " : "", fmt::join(pl.shares, "/"));
  if (pl.replica_sizes.size() > 1)
    out += fmt::format(" in replicas of {} devices at batch shares {:g}",
                       fmt::join(pl.replica_sizes, "/"), fmt::join(pl.batch_shares, "/"));
  return out;
}

std::string describe_layers(const model::Model& m, int first, int last) {
  auto name = [&](int i) { return m.layers[static_cast<std::size_t>(i)].name; };
  if (first == last) return fmt::format("layer {} ({})", first, name(first));
  return fmt::format("layers {}..{} ({} ... {})", first, last, name(first), name(last));
}

Result<Plan> stage_plan_of(const Plan& p, const model::Model& m) {
  if (!p.is_op_level()) return Error{"the plan is not op-level (it has no op_groups)"};
  if (m.layers.empty()) return Error{"the model has no layers"};
  const std::vector<int> owner = group_of_ops(p, m);
  for (std::size_t g = 0; g < p.op_groups.size(); ++g) {
    const OpGroup& grp = p.op_groups[g];
    if (grp.devices.empty()) return Error{fmt::format("op_groups[{}] has no devices", g)};
    if (!grp.shares.empty() && grp.shares.size() != grp.devices.size())
      return Error{fmt::format("op_groups[{}] has {} shares for {} devices", g, grp.shares.size(),
                               grp.devices.size())};
    if ((grp.mode == GroupMode::split || grp.devices.size() > 1) &&
        grp.sync != SyncMethod::all_reduce)
      return Error{fmt::format(
          "op_groups[{}] synchronises its gradients by {}; a stage plan's replicas all-reduce "
          "them",
          g, to_string(grp.sync))};
  }
  // Per layer, the placement of all of its ops (nullopt for a layer without ops).
  std::vector<std::optional<Placement>> layer_placement(m.layers.size());
  for (std::size_t l = 0; l < m.layers.size(); ++l) {
    const model::Layer& layer = m.layers[l];
    int first_op = -1;
    for (int op = layer.first_op; op < layer.first_op + layer.num_ops; ++op) {
      const int g = owner[static_cast<std::size_t>(op)];
      if (g < 0)
        return Error{
            fmt::format("op \"{}\" is in no op group", m.ops[static_cast<std::size_t>(op)].name)};
      Placement pl = placement_of(p.op_groups[static_cast<std::size_t>(g)]);
      if (!layer_placement[l]) {
        layer_placement[l] = std::move(pl);
        first_op = op;
      } else if (!(pl == *layer_placement[l])) {
        return Error{fmt::format(
            "{} is split across op groups: op \"{}\" runs on {} but op \"{}\" on {} (a stage "
            "holds whole layers)",
            describe_layers(m, static_cast<int>(l), static_cast<int>(l)),
            m.ops[static_cast<std::size_t>(first_op)].name, describe(*layer_placement[l]),
            m.ops[static_cast<std::size_t>(op)].name, describe(pl))};
      }
    }
  }
  // A layer without ops joins the stage before it (the first such layers, the stage after them).
  for (std::size_t l = 1; l < m.layers.size(); ++l)
    if (!layer_placement[l]) layer_placement[l] = layer_placement[l - 1];
  for (std::size_t l = m.layers.size() - 1; l-- > 0;)
    if (!layer_placement[l]) layer_placement[l] = layer_placement[l + 1];
  if (!layer_placement[0]) return Error{"the model has no ops"};

  Plan out = same_step(p);
  out.schedule = Schedule::one_f_one_b;
  std::map<int, std::size_t> stage_of_device;
  for (std::size_t l = 0; l < m.layers.size(); ++l) {
    const Placement& pl = *layer_placement[l];
    if (l > 0 && pl == *layer_placement[l - 1]) {
      ++out.stages.back().num_layers;
      continue;
    }
    for (int d : pl.devices) {
      auto [it, inserted] = stage_of_device.emplace(d, out.stages.size());
      if (inserted) continue;
      const Stage& other = out.stages[it->second];
      return Error{fmt::format(
          "device {} runs {} and {}, which are not adjacent (a stage plan runs one stage per "
          "device)",
          d, describe_layers(m, other.first_layer, other.first_layer + other.num_layers - 1),
          describe_layers(m, static_cast<int>(l), static_cast<int>(l)))};
    }
    Stage st;
    st.first_layer = static_cast<int>(l);
    st.num_layers = 1;
    if (pl.tensor) {
      std::size_t at = 0;
      for (std::size_t i = 0; i < pl.replica_sizes.size(); ++i) {
        Replica r;
        const auto size = static_cast<std::size_t>(pl.replica_sizes[i]);
        r.devices.assign(pl.devices.begin() + at, pl.devices.begin() + at + size);
        r.batch_share = pl.batch_shares[i];
        const std::vector<double> shares(pl.shares.begin() + at, pl.shares.begin() + at + size);
        for (double x : shares)
          if (std::abs(x - shares.front()) > 1e-12) r.tp_shares = shares;
        st.replicas.push_back(std::move(r));
        at += size;
      }
      out.stages.push_back(std::move(st));
      continue;
    }
    for (std::size_t j = 0; j < pl.devices.size(); ++j) {
      Replica r;
      r.devices = {pl.devices[j]};
      r.batch_share = pl.shares[j];
      st.replicas.push_back(std::move(r));
    }
    out.stages.push_back(std::move(st));
  }
  return out;
}

}  // namespace

std::optional<Plan> as_stage_plan(const Plan& p, const model::Model& m) {
  auto r = stage_plan_of(p, m);
  if (!r) return std::nullopt;
  return std::move(*r);
}

std::string why_not_stage_plan(const Plan& p, const model::Model& m) {
  auto r = stage_plan_of(p, m);
  return r ? std::string() : r.error().message;
}

std::optional<Plan> as_op_level_plan(const Plan& p, const model::Model& m) {
  auto r = op_level_plan_of(p, m);
  if (!r) return std::nullopt;
  return std::move(*r);
}

std::string why_not_op_level_plan(const Plan& p, const model::Model& m) {
  auto r = op_level_plan_of(p, m);
  return r ? std::string() : r.error().message;
}

}  // namespace hetplan::plan
