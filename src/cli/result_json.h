// Internal to the command line: the JSON form of a simulation result.
#pragma once

#include <nlohmann/json.hpp>

#include "hetplan/model/model.h"
#include "hetplan/plan/plan.h"
#include "hetplan/sim/simulate.h"

namespace hetplan::cli {

nlohmann::ordered_json sim_result_json(const model::Model& m, const plan::Plan& p,
                                       const sim::SimResult& r);

}  // namespace hetplan::cli
