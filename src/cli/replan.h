// Internal to the command line: elastic replanning, as `hetplan run --elastic` does it after a
// worker dies (`hetplan replan` is the same search with its summary and report).
#pragma once

#include <cstdint>
#include <vector>

#include "hetplan/cluster/cluster.h"
#include "hetplan/core/error.h"
#include "hetplan/model/model.h"
#include "hetplan/plan/plan.h"
#include "search_args.h"

namespace hetplan::cli {

// The fastest plan that fits cluster c without the devices `removed` and whose run resumes from
// the checkpoints of a run of plan `before` (search_args' resumes), found by every planner (auto)
// within `a.time_limit_s`, its devices named in c's ids and its global batch and precision
// `before`'s.
Result<plan::Plan> replan_without(const model::Model& m, const cluster::Cluster& c,
                                  const std::vector<int>& removed, const plan::Plan& before,
                                  SearchArgs a);

}  // namespace hetplan::cli
