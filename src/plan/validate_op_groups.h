// Internal to the plan layer: the checks of an op-level plan (validate.cc calls them).
#pragma once

#include "hetplan/cluster/cluster.h"
#include "hetplan/model/model.h"
#include "hetplan/plan/plan.h"

namespace hetplan::plan::detail {

// Throws InputError naming the field for the first problem: settings op-level plans do not take,
// a group's devices, mode, shares, synchronisation and servers, every op in exactly one group, a
// tied head in the group of the table it reads.
void check_op_groups(const Plan& p, const model::Model& m, const cluster::Cluster& c);

}  // namespace hetplan::plan::detail
