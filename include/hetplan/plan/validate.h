// Checks a plan against a model and a cluster: every layer in exactly one stage (so no op is left
// unassigned), devices exist, shares are positive and sum to 1, tensor-parallel degrees divide
// what they split (attention heads, kv heads, experts), replica device sets equal or disjoint,
// micro-batch counts consistent with the global batch. The error names `source`, the field and
// what was expected.
#pragma once

#include <string>

#include "hetplan/cluster/cluster.h"
#include "hetplan/core/error.h"
#include "hetplan/model/model.h"
#include "hetplan/plan/plan.h"

namespace hetplan::plan {

// Ok (true) or the first problem found.
Result<bool> validate_plan(const Plan& p, const model::Model& m, const cluster::Cluster& c,
                           const std::string& source);

}  // namespace hetplan::plan
