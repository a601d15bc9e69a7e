// A plan's devices under other ids: a plan made for a subcluster (cluster/subcluster.h) named in
// the whole cluster's ids.
#pragma once

#include <vector>

#include "hetplan/plan/plan.h"

namespace hetplan::plan {

// p with every device id d (replicas' devices, op groups' devices and servers) replaced by to[d].
// Every id p uses must index `to`.
Plan renumber_devices(const Plan& p, const std::vector<int>& to);

}  // namespace hetplan::plan
