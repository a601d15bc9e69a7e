// Op-level plans: which op group each op of the model belongs to.
#pragma once

#include <string>
#include <vector>

#include "hetplan/model/model.h"
#include "hetplan/plan/plan.h"

namespace hetplan::plan {

// Per model op, the index of the group of p.op_groups that names it (by full name, or by pattern
// when no group names it in full: the first such group), or -1 when none does. Names are looked
// up in a table, so a plan that lists every op by name costs linear time.
std::vector<int> group_of_ops(const Plan& p, const model::Model& m);

// Group g's share of each micro-batch on its device j: shares[j], 1 / devices for even shares,
// 1 for a placed group.
double group_share(const OpGroup& g, std::size_t j);

}  // namespace hetplan::plan
