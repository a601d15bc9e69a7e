#include "hetplan/plan/renumber.h"

namespace hetplan::plan {

Plan renumber_devices(const Plan& p, const std::vector<int>& to) {
  Plan out = p;
  auto rename = [&](std::vector<int>& ids) {
    for (int& d : ids) d = to.at(static_cast<std::size_t>(d));
  };
  for (Stage& s : out.stages)
    for (Replica& r : s.replicas) rename(r.devices);
  for (OpGroup& g : out.op_groups) {
    rename(g.devices);
    rename(g.servers);
  }
  return out;
}

}  // namespace hetplan::plan
