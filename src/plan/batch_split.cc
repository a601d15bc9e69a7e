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

}  // namespace hetplan::plan
