// Reading the key=value spec of each model family into its builder's configuration.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hetplan/model/model.h"
#include "spec_args.h"

namespace hetplan::model::detail {

const std::vector<std::string>& family_names();  // gpt, llama, bert, vit, moe, resnet, ...

// Builds `family` from `args` (throwing InputError naming the key on a bad value); nullopt when
// `family` is not a family name.
std::optional<Model> build_family(std::string_view family, SpecArgs& args);

}  // namespace hetplan::model::detail
