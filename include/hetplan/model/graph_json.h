// Versioned JSON form of a model graph (version: 1): reading checks every op's fields, unknown
// kinds, dangling inputs and cycles, naming the file and field.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "hetplan/core/error.h"
#include "hetplan/model/model.h"

namespace hetplan::model {

nlohmann::json to_json(const Model& m);
Result<Model> model_from_json(const nlohmann::json& doc, const std::string& source);
Result<Model> read_model_file(const std::string& file);

}  // namespace hetplan::model
