// Plan validation: the checks that need the model and the cluster, plus the range checks a plan
// built in code (rather than read from a file) has not been through.
#include "hetplan/plan/validate.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "hetplan/core/json_util.h"
#include "validate_op_groups.h"

namespace hetplan::plan {
namespace {

constexpr double kShareTolerance = 1e-6;

// "layers 30..35 (layers.29 ... head)" or "layer 35 (head)".
std::string describe_layers(const model::Model& m, int first, int last) {
  auto name = [&](int i) { return m.layers[static_cast<std::size_t>(i)].name; };
  if (first == last) return fmt::format("layer {} ({})", first, name(first));
  return fmt::format("layers {}..{} ({} ... {})", first, last, name(first), name(last));
}

std::string stage_path(std::size_t s) { return index_path("stages", s); }
std::string replica_path(std::size_t s, std::size_t r) {
  return index_path(field_path(stage_path(s), "replicas"), r);
}

// DLCP's settings: what the simulator's chunked transport (sim/grad_chunks.h) models.
void check_gradient_transport(const Plan& p) {
  if (p.metrics < 0 || p.metrics > kMaxMetrics)
    throw InputError("metrics", fmt::format("expected an integer in 0..{}", kMaxMetrics));
  if (!(p.loss_bound >= 0 && p.loss_bound <= kMaxLossBound))
    throw InputError("loss_bound", fmt::format("expected a number in [0, {:g}], got {:g}",
                                               kMaxLossBound, p.loss_bound));
  if (p.loss_bound > 0 && p.grad_priority == GradPriority::none)
    throw InputError("loss_bound",
                     "expected grad_priority layer or layer+magnitude with a loss_bound above 0 "
                     "(late chunks are dropped lowest priority first)");
  if (p.grad_priority == GradPriority::none) return;
  const std::string what = fmt::format("grad_priority={}", to_string(p.grad_priority));
  if (p.is_op_level())
    throw InputError("grad_priority",
                     fmt::format("{} applies to stage plans (expected none in an op-level plan)",
                                 to_string(p.grad_priority)));
  if (p.zero_stage != 0)
    throw InputError("zero_stage",
                     fmt::format("expected 0 with {} (chunks carry whole gradients; ZeRO's "
                                 "sharded ones are not modelled)",
                                 what));
  for (std::size_t i = 0; i < p.grad_sync.size(); ++i)
    if (p.grad_sync[i].method == SyncMethod::sufficient_factor)
      throw InputError(field_path(index_path("grad_sync", i), "method"),
                       fmt::format("expected all_reduce, parameter_server or none with {} "
                                   "(sufficient factors are not sent in chunks)",
                                   what));
}

void check_globals(const Plan& p) {
  if (p.global_batch < 1 || p.global_batch > kMaxGlobalBatch)
    throw InputError("global_batch", fmt::format("expected an integer in 1..{}, got {}",
                                                 kMaxGlobalBatch, p.global_batch));
  if (p.num_microbatches < 1 || p.num_microbatches > kMaxMicrobatches)
    throw InputError("num_microbatches", fmt::format("expected an integer in 1..{}, got {}",
                                                     kMaxMicrobatches, p.num_microbatches));
  if (p.num_microbatches > p.global_batch)
    throw InputError("num_microbatches",
                     fmt::format("expected at most global_batch ({}) micro-batches, got {}",
                                 p.global_batch, p.num_microbatches));
  if (p.zero_stage < 0 || p.zero_stage > 3)
    throw InputError("zero_stage", "expected an integer in 0..3");
  if (cost::fused(p.attention) && p.is_op_level())
    throw InputError("attention",
                     "expected plain in an op-level plan (its groups place the attention core's "
                     "ops one by one; flash and flash1 fuse them into one kernel of a stage)");
  if (p.overlap != Overlap::none && p.is_op_level())
    throw InputError("overlap",
                     "expected none in an op-level plan (its collectives are placed "
                     "op by op)");
  if (overlaps_param_gather(p.overlap) && p.zero_stage != 1 && p.zero_stage != 2)
    throw InputError("overlap",
                     fmt::format("expected zero_stage 1 or 2 for '{}' (it hides the all-gather "
                                 "of the updated parameter shards), got {}",
                                 to_string(p.overlap), p.zero_stage));
  if (!(p.grad_bucket_bytes > 0) || !std::isfinite(p.grad_bucket_bytes))
    throw InputError("grad_bucket_bytes", "expected a number > 0");
  check_gradient_transport(p);
}

// Every layer in exactly one stage, stages in model order.
void check_coverage(const Plan& p, const model::Model& m) {
  const int num_layers = static_cast<int>(m.layers.size());
  if (num_layers == 0) throw InputError("the model has no layers");
  if (p.stages.empty()) throw InputError("stages", "expected at least one stage");
  int next = 0;  // first layer not yet assigned
  for (std::size_t s = 0; s < p.stages.size(); ++s) {
    const Stage& st = p.stages[s];
    const std::string path = stage_path(s);
    if (st.num_layers < 1)
      throw InputError(field_path(path, "num_layers"), "expected an integer >= 1");
    if (st.first_layer < 0 || st.first_layer >= num_layers)
      throw InputError(
          field_path(path, "first_layer"),
          fmt::format("expected a layer index in 0..{} (the model has {} layers), got {}",
                      num_layers - 1, num_layers, st.first_layer));
    const long long end = static_cast<long long>(st.first_layer) + st.num_layers;
    if (end > num_layers)
      throw InputError(field_path(path, "num_layers"),
                       fmt::format("layers {}..{} run past the model's last layer {} ({})",
                                   st.first_layer, end - 1, num_layers - 1, m.layers.back().name));
    if (st.first_layer > next)
      throw InputError("stages", fmt::format("{} are not assigned to any stage",
                                             describe_layers(m, next, st.first_layer - 1)));
    if (st.first_layer < next) {
      int overlap_last = std::min(next, static_cast<int>(end)) - 1;
      throw InputError(field_path(path, "first_layer"),
                       fmt::format("{} are already assigned to an earlier stage (expected stages "
                                   "in model order starting at layer {})",
                                   describe_layers(m, st.first_layer, overlap_last), next));
    }
    next = static_cast<int>(end);
  }
  if (next < num_layers)
    throw InputError("stages", fmt::format("{} are not assigned to any stage",
                                           describe_layers(m, next, num_layers - 1)));
}

bool even_shares(const Replica& r) {
  if (r.tp_shares.empty()) return true;
  for (double s : r.tp_shares)
    if (std::abs(s - r.tp_shares.front()) > kShareTolerance) return false;
  return true;
}

// Tensor-parallel degree against what it splits: heads (and kv heads, experts) for even splits;
// at least one head per device for uneven ones.
void check_tensor_parallel(const Replica& r, const model::Model& m, const std::string& path) {
  const int tp = static_cast<int>(r.devices.size());
  if (tp <= 1 || m.heads <= 0) return;
  const std::string field = field_path(path, "devices");
  if (!even_shares(r)) {
    if (tp > m.heads)
      throw InputError(field,
                       fmt::format("tensor-parallel degree {} exceeds the {} attention heads "
                                   "(expected at most one device per head)",
                                   tp, m.heads));
    return;
  }
  auto require_divides = [&](int count, const char* what) {
    if (count > 0 && count % tp != 0)
      throw InputError(field, fmt::format("tensor-parallel degree {} does not divide the {} {} "
                                          "(expected a divisor of {} for an even split)",
                                          tp, count, what, count));
  };
  require_divides(m.heads, "attention heads");
  require_divides(m.kv_heads, "key/value heads");
  require_divides(m.experts, "experts");
}

void check_replica(const Replica& r, const model::Model& m, const cluster::Cluster& c,
                   const std::string& path, bool splits_heads) {
  const int n = c.num_devices();
  if (r.devices.empty())
    throw InputError(field_path(path, "devices"), "expected at least one device");
  const std::string dpath = field_path(path, "devices");
  for (std::size_t i = 0; i < r.devices.size(); ++i) {
    int d = r.devices[i];
    if (d < 0 || d >= n)
      throw InputError(index_path(dpath, i),
                       fmt::format("device {} does not exist (the cluster has {} devices)", d, n));
    for (std::size_t k = 0; k < i; ++k)
      if (r.devices[k] == d)
        throw InputError(
            index_path(dpath, i),
            fmt::format("device {} appears twice in the replica (also at devices[{}])", d, k));
  }
  detail::check_shares(r.tp_shares, r.devices.size(), field_path(path, "tp_shares"));
  if (!(r.batch_share > 0 && r.batch_share <= 1))
    throw InputError(field_path(path, "batch_share"), "expected a number in (0, 1]");
  if (splits_heads) check_tensor_parallel(r, m, path);
}

void check_stage_replicas(const Plan& p, const model::Model& m, const cluster::Cluster& c) {
  for (std::size_t s = 0; s < p.stages.size(); ++s) {
    const Stage& st = p.stages[s];
    if (st.replicas.empty())
      throw InputError(field_path(stage_path(s), "replicas"), "expected at least one replica");
    // Heads (and experts) bound the tensor-parallel degree where a transformer layer splits some
    // op by tensor dimension; a plan that runs every such op by batch or replicated is free of it.
    bool splits_heads = false;
    for (int l = st.first_layer; l < st.first_layer + st.num_layers; ++l) {
      const model::Layer& layer = m.layers[static_cast<std::size_t>(l)];
      if (layer.kind != model::LayerKind::transformer) continue;
      for (int op = layer.first_op; op < layer.first_op + layer.num_ops; ++op) {
        const model::Op& o = m.ops[static_cast<std::size_t>(op)];
        splits_heads = splits_heads || (o.shard != model::ShardKind::replicated &&
                                        split_of(p, o.name) == SplitKind::tensor);
      }
    }
    double sum = 0;
    for (std::size_t r = 0; r < st.replicas.size(); ++r) {
      check_replica(st.replicas[r], m, c, replica_path(s, r), splits_heads);
      sum += st.replicas[r].batch_share;
    }
    if (std::abs(sum - 1) > kShareTolerance)
      throw InputError(field_path(stage_path(s), "replicas"),
                       fmt::format("expected batch_share values summing to 1, got {}", sum));
    // Samples each replica handles per micro-batch round must be positive (it always is when the
    // shares are, but guard against shares so small the product underflows).
    for (std::size_t r = 0; r < st.replicas.size(); ++r) {
      double samples =
          st.replicas[r].batch_share * static_cast<double>(p.global_batch) / p.num_microbatches;
      if (!(samples > 0))
        throw InputError(field_path(replica_path(s, r), "batch_share"),
                         "expected a share that gives the replica samples in every micro-batch");
    }
  }
}

using DeviceSet = std::vector<int>;  // sorted

DeviceSet sorted(std::vector<int> v) {
  std::sort(v.begin(), v.end());
  return v;
}

std::string set_text(const DeviceSet& s) { return fmt::format("{{{}}}", fmt::join(s, ",")); }

// Two replicas' device sets are equal or disjoint; replicas of one stage are disjoint.
void check_disjoint(const Plan& p) {
  struct Owner {
    DeviceSet set;
    std::size_t stage, replica;
  };
  std::map<int, Owner> owner;  // device -> the first replica that used it
  for (std::size_t s = 0; s < p.stages.size(); ++s) {
    const Stage& st = p.stages[s];
    for (std::size_t r = 0; r < st.replicas.size(); ++r) {
      DeviceSet set = sorted(st.replicas[r].devices);
      for (int d : set) {
        auto [it, inserted] = owner.emplace(d, Owner{set, s, r});
        if (inserted) continue;
        const Owner& o = it->second;
        if (o.set != set)
          throw InputError(
              field_path(replica_path(s, r), "devices"),
              fmt::format("device set {} overlaps {} of {} (expected device sets that "
                          "are equal or disjoint)",
                          set_text(set), set_text(o.set), replica_path(o.stage, o.replica)));
        if (o.stage == s && o.replica != r)
          throw InputError(field_path(replica_path(s, r), "devices"),
                           fmt::format("uses the same devices as replicas[{}] of the same stage "
                                       "(expected disjoint replicas)",
                                       o.replica));
      }
    }
  }
}

// The device sets of a stage, as a comparable key.
std::vector<DeviceSet> stage_key(const Stage& st) {
  std::vector<DeviceSet> key;
  for (const Replica& r : st.replicas) key.push_back(sorted(r.devices));
  std::sort(key.begin(), key.end());
  return key;
}

// Stages that share devices: only the interleaved schedule runs several stages on one device
// group, and then the groups repeat in order: stage k runs where stage k mod G does.
void check_stage_groups(const Plan& p) {
  std::vector<std::vector<DeviceSet>> keys;
  for (const Stage& st : p.stages) keys.push_back(stage_key(st));
  std::map<int, std::size_t> first_stage;  // device -> the first stage that uses it
  std::map<std::vector<DeviceSet>, std::size_t> first_use;
  for (std::size_t s = 0; s < keys.size(); ++s) {
    first_use.emplace(keys[s], s);
    for (const Replica& r : p.stages[s].replicas) {
      for (int d : r.devices) {
        auto [it, inserted] = first_stage.emplace(d, s);
        if (inserted || it->second == s) continue;
        const std::size_t other = it->second;
        if (p.schedule != Schedule::interleaved)
          throw InputError(stage_path(s),
                           fmt::format("shares device {} with stages[{}]; only the interleaved "
                                       "schedule runs several stages on the same devices",
                                       d, other));
        if (keys[s] != keys[other])
          throw InputError(stage_path(s),
                           fmt::format("shares device {} with stages[{}] but not its replica "
                                       "device sets (expected the same replicas as stages[{}] or "
                                       "devices of no other stage)",
                                       d, other, other));
      }
    }
  }
  if (p.schedule != Schedule::interleaved) return;
  const std::size_t distinct = first_use.size();
  if (keys.size() % distinct != 0)
    throw InputError("stages", fmt::format("expected a multiple of the {} device groups for the "
                                           "interleaved schedule, got {} stages",
                                           distinct, keys.size()));
  for (std::size_t s = 0; s < keys.size(); ++s)
    if (keys[s] != keys[s % distinct])
      throw InputError(stage_path(s),
                       fmt::format("expected the devices of stages[{}] (the interleaved schedule "
                                   "cycles through the {} device groups in order)",
                                   s % distinct, distinct));
  const auto num_groups = static_cast<long long>(distinct);
  if (keys.size() > distinct && p.num_microbatches % num_groups != 0)
    throw InputError("num_microbatches",
                     fmt::format("expected a multiple of the {} pipeline device groups for the "
                                 "interleaved schedule, got {}",
                                 distinct, p.num_microbatches));
}

void check_patterns(const Plan& p, const model::Model& m) {
  auto matches_some_op = [&](const std::string& pattern) {
    for (const model::Op& op : m.ops)
      if (op_pattern_matches(pattern, op.name)) return true;
    return false;
  };
  for (std::size_t i = 0; i < p.op_overrides.size(); ++i)
    if (!matches_some_op(p.op_overrides[i].ops))
      throw InputError(
          field_path(index_path("op_overrides", i), "ops"),
          fmt::format("pattern \"{}\" matches no op of the model", p.op_overrides[i].ops));
  for (std::size_t i = 0; i < p.grad_sync.size(); ++i)
    if (!matches_some_op(p.grad_sync[i].ops))
      throw InputError(
          field_path(index_path("grad_sync", i), "ops"),
          fmt::format("pattern \"{}\" matches no op of the model", p.grad_sync[i].ops));
}

}  // namespace

Result<bool> validate_plan(const Plan& p, const model::Model& m, const cluster::Cluster& c,
                           const std::string& source) {
  return capture_errors(source, [&] {
    check_globals(p);
    if (p.is_op_level()) {
      detail::check_op_groups(p, m, c);
      return true;
    }
    check_coverage(p, m);
    check_stage_replicas(p, m, c);
    check_disjoint(p);
    check_stage_groups(p);
    check_patterns(p, m);
    return true;
  });
}

}  // namespace hetplan::plan
