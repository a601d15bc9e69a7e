// Internal to the runtime: checkpoints that do not depend on the plan. A step's checkpoint is a
// directory step-<n> of files, each holding whole tensors by the module's parameter names: the
// parameter, and Adam's two moments for it, in the shape the model description gives (however
// the plan that wrote them split them over ranks), with the step count, the global batch and the
// data seed. A job under any plan of the same model reads back the tensors its ranks hold.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "collectives.h"
#include "hetplan/core/error.h"
#include "shard_layouts.h"

namespace hetplan::runtime::detail {

// Each parameter of `module` by its tensor: its name and whole shape (taken before a plan splits
// the tensors in place, so that a split tensor keeps its entry).
using ParameterNames = std::map<const void*, std::pair<std::string, std::vector<std::int64_t>>>;
ParameterNames parameter_names(const torch::nn::Module& module);

// Whose names a checkpoint's tensors go by: the stage runtime's modules' parameter names
// (torch_modules.h), or the op-by-op runtime's op graph's ("op<i>.weight", op_graph.h).
enum class Naming : std::int64_t { module = 0, op_graph = 1 };
const char* to_string(Naming n);  // "a stage run", "an op-by-op run"

// Dynamic loss scaling's state after a step (loss_scaler.h): the steps it skipped so far (the
// optimizer took the others), its scale (0: the run scaled no loss) and its clean steps in a row.
struct ScalerState {
  std::int64_t skipped = 0;
  double scale = 0;
  std::int64_t clean = 0;
  bool operator==(const ScalerState&) const = default;
};

// What a run resumes from: the steps done, and the data position they stand for.
struct CheckpointMeta {
  std::int64_t steps = 0;
  std::int64_t global_batch = 0;
  std::uint64_t seed = 0;
  Naming naming = Naming::module;
  ScalerState scaler;  // (a checkpoint written before it was kept: none skipped, no scale)
  // The optimizer's step count: the steps done less the ones loss scaling skipped.
  std::int64_t optimizer_steps() const { return steps - scaler.skipped; }
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

// The step every rank of the job resumes from: the newest whole step of dir (0: none, or dir
// empty), compared over `world` (null: one rank); an error when it cannot be read or the ranks
// find different steps.
Result<int> agreed_resume_step(const std::string& dir, const std::string& option,
                               Collectives* world, const torch::Device& device);

// Reads step `steps` of dir (read_checkpoint), refuses another global batch, seed or naming than
// the run's, and copies every tensor of it that `module` has by name into the module's parameter
// (whole: call before the plan splits them). The checkpoint is kept for the moments.
Result<Checkpoint> resume_values(const std::string& dir, int steps, const std::string& option,
                                 const CheckpointMeta& run, torch::nn::Module& module,
                                 const torch::Device& device, const std::string& model_name);

// The whole tensor `whole` (a parameter's shape as the model gives it) in t's layout: reshaped to
// t's whole shape, then cut to t's slices (layouts.to_part); a new tensor.
torch::Tensor part_of_whole(const ShardLayouts& layouts, const torch::Tensor& t,
                            const torch::Tensor& whole);

// The resume directory and the option that names it in errors: --resume's, else --checkpoint's.
std::pair<std::string, std::string> resume_source(const std::string& resume_dir,
                                                  const std::string& checkpoint_dir);

// Adam's moments of the ZeRO slice `owned` ([begin, end) of `numel` flattened elements),
// gathered over `group` (every member its slice, summed into zeros elsewhere) and unflattened into
// tensors shaped as `shapes`: {first moments, second moments}.
std::pair<std::vector<torch::Tensor>, std::vector<torch::Tensor>> gathered_moments(
    torch::optim::Adam& adam, const torch::Tensor& owned, std::int64_t numel, std::int64_t begin,
    std::int64_t end, Collectives& group, const std::vector<torch::Tensor>& shapes,
    std::chrono::milliseconds timeout);

// Before any rank writes its part of step `steps`: rank 0 removes what an earlier attempt at the
// step left unpublished in dir (a job that stopped before publishing it, whose plan may have
// written other parts: read with this job's, they would override them), then every rank of
// `world` (null: one rank) waits for it. An error names the directory.
Result<bool> clear_unpublished_step(Collectives* world, int rank, const std::string& dir,
                                    int steps);

// Once this rank has written its part of step `steps`: waits for every rank of `world` (null: one
// rank), then rank 0 publishes the step (publish_checkpoint). An error names the file.
Result<bool> publish_when_written(Collectives* world, int rank, const std::string& dir, int steps);

// Adam's state of `t` (a tensor the optimizer steps): the two moments, and the step count.
void set_adam_state(torch::optim::Adam& adam, const torch::Tensor& t, std::int64_t steps,
                    const torch::Tensor& exp_avg, const torch::Tensor& exp_avg_sq);
// The moments Adam keeps for t (zeros shaped as t before its first step).
std::pair<torch::Tensor, torch::Tensor> adam_moments(torch::optim::Adam& adam,
                                                     const torch::Tensor& t);

}  // namespace hetplan::runtime::detail
