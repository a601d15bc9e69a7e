// Internal to the runtime: checkpoints that do not depend on the plan. A step's checkpoint is a
// directory step-<n> of files, each holding whole tensors by the module's parameter names: the
// parameter, and Adam's two moments for it, in the shape the model description gives (however
// the plan that wrote them split them over ranks), with the step count, the global batch and the
// data seed. A job under any plan of the same model reads back the tensors its ranks hold.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hetplan/core/error.h"

namespace hetplan::runtime::detail {

// What a run resumes from: the steps done, and the data position they stand for.
struct CheckpointMeta {
  std::int64_t steps = 0;
  std::int64_t global_batch = 0;
  std::uint64_t seed = 0;
};

// One parameter, whole: its value and Adam's first and second moments.
struct WholeTensor {
  torch::Tensor value, exp_avg, exp_avg_sq;
};

// The number of steps of the directory's newest whole checkpoint (its `latest` file), or 0 for
// none. `option` names the argument in errors ("--checkpoint").
Result<int> latest_checkpoint(const std::string& dir, const std::string& option);

// Writes `tensors` (by name) as file `part` of step `meta.steps` in dir: written next to its
// final name, then moved there. Throws c10::Error or std::filesystem::filesystem_error.
void write_checkpoint_part(const std::string& dir, const std::string& part,
                           const CheckpointMeta& meta,
                           const std::map<std::string, WholeTensor>& tensors);

// Once every part of step `steps` is written: points `latest` at it (written next to it, then
// moved over it) and removes the older steps. Throws std::filesystem::filesystem_error.
void publish_checkpoint(const std::string& dir, int steps);

// Every tensor of step `steps` in dir, by name, on `device`, and the step's meta (alike in every
// part, else an error).
struct Checkpoint {
  CheckpointMeta meta;
  std::map<std::string, WholeTensor> tensors;
};
Result<Checkpoint> read_checkpoint(const std::string& dir, int steps, const torch::Device& device,
                                   const std::string& option);

}  // namespace hetplan::runtime::detail
