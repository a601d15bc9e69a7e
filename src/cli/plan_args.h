// Internal to the command line: the plan a command works on, from --plan FILE or the --strategy
// shorthand (simulate and run share it).
#pragma once

#include <string>

#include "hetplan/cluster/cluster.h"
#include "hetplan/core/error.h"
#include "hetplan/model/model.h"
#include "hetplan/plan/plan.h"

namespace hetplan::cli {

// The plan of `plan_file`, or of `strategy` (or `default_strategy` when both are empty), validated
// against the model and cluster. Errors name the file or argument and the field.
Result<plan::Plan> plan_from_args(const std::string& plan_file, const std::string& strategy,
                                  const std::string& default_strategy, const model::Model& m,
                                  const cluster::Cluster& c);

}  // namespace hetplan::cli
