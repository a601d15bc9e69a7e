#include "hetplan/plan/run_form.h"

#include <utility>

#include "hetplan/plan/batch_split.h"
#include "hetplan/plan/op_groups.h"

namespace hetplan::plan {

RunForm run_form(const Plan& p, const model::Model& m) {
  RunForm f{p};
  if (p.is_op_level())
    if (auto stages = as_stage_plan(p, m)) {
      f.stages_from_op_level = static_cast<int>(stages->stages.size());
      f.plan = std::move(*stages);
    }
  if (auto dp = as_data_parallel(m, f.plan)) {
    f.per_device_replicas = true;
    f.plan = std::move(*dp);
  }
  if (auto program = zero3_as_batch_program(m, f.plan)) {
    f.zero3_batch_program = true;
    f.plan = std::move(*program);
  }
  return f;
}

std::set<int> plan_devices(const Plan& p) {
  std::set<int> devices;
  for (const auto& st : p.stages)
    for (const auto& r : st.replicas) devices.insert(r.devices.begin(), r.devices.end());
  for (const auto& g : p.op_groups) devices.insert(g.devices.begin(), g.devices.end());
  return devices;
}

}  // namespace hetplan::plan
