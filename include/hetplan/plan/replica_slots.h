// How replicas of unlike sizes meet to sum their gradients: in k slots, k the smallest replica's
// device count. Slot j of a replica holds its devices j, j + k, j + 2k, ...; one collective per
// slot runs over one device per replica and moves the largest share of the gradient any replica
// puts in that slot. The simulator (sim/stage_costs) and the estimator (search/estimate) both
// price gradient sums this way.
#pragma once

#include <cstddef>

#include "hetplan/plan/plan.h"

namespace hetplan::plan {

// The share of replica r's gradient its slot j of k holds.
inline double slot_share(const Replica& r, std::size_t j, std::size_t k) {
  double in_slot = 0;
  for (std::size_t i = j; i < r.devices.size(); i += k) in_slot += tp_share(r, i);
  return in_slot;
}

}  // namespace hetplan::plan
