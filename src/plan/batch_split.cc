#include "hetplan/plan/batch_split.h"

#include <algorithm>

namespace hetplan::plan {

bool splits_every_op_by_batch(const model::Model& m, const Plan& p) {
  return !m.ops.empty() && std::all_of(m.ops.begin(), m.ops.end(), [&](const model::Op& o) {
    return split_of(p, o.name) == SplitKind::batch;
  });
}

std::optional<Plan> as_data_parallel(const model::Model& m, const Plan& p) {
  bool grouped = false;
  for (const Stage& st : p.stages)
    for (const Replica& r : st.replicas) grouped = grouped || r.devices.size() > 1;
  if (!grouped || !splits_every_op_by_batch(m, p)) return std::nullopt;
  Plan out = p;
  out.op_overrides.clear();
  for (Stage& st : out.stages) {
    std::vector<Replica> replicas;
    for (const Replica& r : st.replicas) {
      for (std::size_t j = 0; j < r.devices.size(); ++j) {
        Replica one;
        one.devices = {r.devices[j]};
        one.batch_share = r.batch_share * tp_share(r, j);
        replicas.push_back(std::move(one));
      }
    }
    st.replicas = std::move(replicas);
  }
  return out;
}

std::optional<Plan> zero3_as_batch_program(const model::Model& m, const Plan& p) {
  if (p.zero_stage != 3 || p.is_op_level() || p.stages.size() != 1 || p.sequence_parallel ||
      p.grad_priority != GradPriority::none || p.loss_bound > 0 || p.multipath != Multipath::ecmp ||
      (m.family != model::Family::decoder_lm && m.family != model::Family::mlp))
    return std::nullopt;
  const Stage& st = p.stages.front();
  if (st.replicas.size() < 2 ||
      std::any_of(st.replicas.begin(), st.replicas.end(),
                  [](const Replica& r) { return r.devices.size() != 1; }) ||
      std::any_of(p.grad_sync.begin(), p.grad_sync.end(),
                  [](const GradSync& g) { return g.method != SyncMethod::all_reduce; }))
    return std::nullopt;
  Plan out = p;
  out.zero_stage = 0;
  out.op_overrides = {OpOverride{"*", SplitKind::batch_sharded}};
  Replica one;
  one.batch_share = 1;
  for (const Replica& r : st.replicas) {
    one.devices.push_back(r.devices.front());
    one.tp_shares.push_back(r.batch_share);
  }
  out.stages.front().replicas = {std::move(one)};
  return out;
}

}  // namespace hetplan::plan
