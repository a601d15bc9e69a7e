// The built-in model zoo: presets by name and parametric families by key=value spec.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "hetplan/core/error.h"
#include "hetplan/model/model.h"

namespace hetplan::model {

struct PresetInfo {
  std::string name;                 // "gpt3-175b"
  std::string spec;                 // equivalent family spec, "gpt:layers=96,hidden=12288,..."
  std::string description;          // one line, with the published parameter count it must match
  double published_parameters = 0;  // as published (e.g. 175e9), for tests and listings
  // Relative tolerance of the match: 1%, wider only where the published figure is a rounded name
  // that the published architecture does not reach (the description says by how much).
  double tolerance = 0.01;
};

const std::vector<PresetInfo>& presets();
const PresetInfo* find_preset(std::string_view name);  // nullptr when there is none

// The family names a spec may start with: gpt, llama, bert, vit, moe, resnet, vgg, inception, mlp.
const std::vector<std::string>& model_families();

// Builds a model from a preset name ("llama2-7b"), a family spec ("gpt:layers=24,hidden=2304,
// heads=24,seq=2048,vocab=51200"; families: gpt, llama, bert, vit, moe, resnet, vgg, inception,
// mlp), or a graph JSON file path (ending in .json). A preset takes overrides after a colon
// ("gpt3-1.3b:seq=1024,layers=12"). `source` names the argument in errors, e.g. "--model: gpt:
// heads=7: expected a divisor of hidden (2304)"; errors in a graph file name the file instead.
Result<Model> load_model(std::string_view text, std::string_view source = "--model");
// The same model built in `dtype` (a plan's precision): a preset or family spec as with dtype=
// (replacing the spec's own), an ONNX file as with its dtype= option. A graph JSON file's byte
// counts are its own dtype's: another dtype is an error naming the file. The name stays `text`.
Result<Model> load_model(std::string_view text, std::string_view source, DType dtype);

}  // namespace hetplan::model
