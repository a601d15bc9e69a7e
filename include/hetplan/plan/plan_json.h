// Plan JSON (version: 1): stable, readable, diffable.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "hetplan/core/error.h"
#include "hetplan/plan/plan.h"

namespace hetplan::plan {

nlohmann::json to_json(const Plan& p);
std::string to_json_text(const Plan& p);  // pretty, 2-space indent, trailing newline
Result<Plan> plan_from_json(const nlohmann::json& doc, const std::string& source);
Result<Plan> read_plan_file(const std::string& file);
std::string plan_fingerprint(const Plan& p);  // hash of the canonical JSON

}  // namespace hetplan::plan
