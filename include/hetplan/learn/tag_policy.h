// The learned guidance of TAG's tree search and HeteroG's decoder (search/tag_features.h), as a
// trained network read from a file that `hetplan train-policy` writes (train_policy.h).
#pragma once

#include <memory>
#include <string>

#include "hetplan/core/error.h"
#include "hetplan/search/tag_features.h"

namespace hetplan::learn {

// The weights shipped with hetplan (data/policy/tag.pt in the source tree).
std::string default_policy_file();

// Reads a policy file; errors name the file and what is wrong with it. Evaluation is
// deterministic (one thread, no dropout).
Result<std::shared_ptr<search::TagGuide>> load_tag_policy(const std::string& file);

}  // namespace hetplan::learn
