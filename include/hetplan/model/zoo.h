// The built-in model zoo: presets by name and parametric families by key=value spec.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "hetplan/core/error.h"
#include "hetplan/model/model.h"

namespace hetplan::model {

struct PresetInfo {
  std::string name;         // "gpt3-175b"
  std::string spec;         // equivalent family spec, "gpt:layers=96,hidden=12288,..."
  std::string description;  // one line, with the published parameter count it must match
  double published_parameters = 0;  // as published (e.g. 175e9), for tests and listings
};

const std::vector<PresetInfo>& presets();

// Builds a model from a preset name ("llama2-7b"), a family spec ("gpt:layers=24,hidden=2304,
// heads=24,seq=2048,vocab=51200"; families: gpt, llama, bert, vit, moe, resnet, vgg, inception,
// mlp), or a graph JSON file path (ending in .json). `source` names the argument in errors, e.g.
// "--model".
Result<Model> load_model(std::string_view text, std::string_view source = "--model");

}  // namespace hetplan::model
