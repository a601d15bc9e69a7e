// Internal to plan export: what the engines' files share (the launch script's preamble, the
// Megatron-style grid that Megatron-LM and DeepSpeed both express a stage plan in).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hetplan/cluster/cluster.h"
#include "hetplan/model/model.h"
#include "hetplan/plan/export.h"
#include "hetplan/plan/plan.h"

namespace hetplan::plan::detail {

// One node of a launch: the devices it runs, in the order of its workers (local ranks).
struct LaunchNode {
  int node = 0;              // index into Cluster::nodes
  std::vector<int> devices;  // device ids
};

// The nodes of a launch whose ranks run `rank_devices` (rank r on rank_devices[r]), given that a
// launcher numbers ranks node by node: each node's ranks must be consecutive. Empty when they
// are not.
std::vector<LaunchNode> launch_nodes(const std::vector<int>& rank_devices,
                                     const cluster::Cluster& c);

// `text` with control characters (a newline in a plan's free-text planner field) made spaces, for
// a script's comment line.
std::string one_line(std::string text);

// The script comment that lists the differences ("# It realises the plan as written." for none).
std::string differences_comment(const std::vector<std::string>& differences);

// launch_nodes of rank_devices, or where a node's ranks are not consecutive, a difference saying
// so (naming `engine`) and the launch of the same devices in node order (each node's by local
// rank), which moves some of the plan's groups to other devices.
std::vector<LaunchNode> placed_launch_nodes(const std::vector<int>& rank_devices,
                                            const cluster::Cluster& c, const std::string& engine,
                                            std::vector<std::string>& differences);

// "the <planner> plan for <model> on <cluster>", on one line: what a script's first comment names.
std::string plan_title(const Plan& p, const model::Model& m, const cluster::Cluster& c);

// The start of a launch script that runs one launcher per node: the header comment (`what`, then
// each difference as a comment), NNODES, NODE_RANK (from the environment; 0 by default on one
// node), MASTER_ADDR, MASTER_PORT and TORCHRUN (the launcher's command), and per node NPROC and
// CUDA_VISIBLE_DEVICES.
std::string launch_preamble(const std::string& what, const std::vector<std::string>& differences,
                            const std::vector<LaunchNode>& nodes, const cluster::Cluster& c,
                            int master_port);

// The torchrun arguments of one node of such a script (after the preamble).
std::string torchrun_arguments();

// Whether the cluster's devices are GPUs (a CPU cluster runs with --device cpu).
bool has_gpus(const cluster::Cluster& c);

// A stage plan as a uniform Megatron-style grid: tp x dp devices per pipeline stage, pp stages
// (each device group once; vpp model chunks per group when interleaved), ranks numbered with tp
// fastest, then dp, then pp (Megatron-LM's and DeepSpeed's order).
struct Grid {
  int tp = 1, dp = 1, pp = 1, vpp = 1;
  std::int64_t global_batch = 0;
  int micro_batch = 1;                // samples per replica per micro-batch
  int accumulation = 1;               // micro-batches per iteration: gbs / (mbs * dp)
  std::vector<int> rank_devices;      // the device of each grid rank
  std::vector<int> blocks_per_stage;  // transformer (or other) blocks of each plan stage
};

// The grid closest to p, adding to `differences` (naming `engine`) each way it is not p: tensor-
// parallel degrees or device counts that differ between replicas or stages (the most common
// degree is kept), uneven tp or batch shares, a global batch the grid's micro-batches do not
// divide.
Grid plan_grid(const Plan& p, const model::Model& m, const std::string& engine,
               std::vector<std::string>& differences);

// What a stage plan holds that neither Megatron-LM nor DeepSpeed expresses: gradient
// synchronisation other than all-reduce, DLCP's priorities, dropping and spraying, op overrides.
void add_sync_differences(const Plan& p, const std::string& engine,
                          std::vector<std::string>& differences);

// A plan whose Adam step is not fused (Plan::adam), for an engine that fuses it: its steps take
// less than the plan's predicted time.
void add_adam_difference(const Plan& p, const std::string& engine,
                         std::vector<std::string>& differences);
// A plan with training metrics (Plan::metrics), for an engine that computes none: likewise.
void add_metrics_difference(const Plan& p, const std::string& engine,
                            std::vector<std::string>& differences);

// The plan's overlap of collectives with computation (Plan::overlap), which `engine` does not
// do: the plan's predicted time counts those collectives as hidden.
void add_overlap_difference(const Plan& p, const std::string& engine,
                            std::vector<std::string>& differences);

// The device types the plan uses that lack BF16 ("V100-SXM2-32GB (Volta)"), by type index.
std::vector<std::string> types_without_bf16(const Plan& p, const cluster::Cluster& c);

// The 16-bit type `engine` is written to compute in: the model's, except bf16 on a plan that uses
// a type without BF16 (Pascal, Volta, Turing), which becomes fp16 with a difference saying so.
model::DType engine_dtype(const Plan& p, const model::Model& m, const cluster::Cluster& c,
                          const std::string& engine, std::vector<std::string>& differences);

// `text` as one word of a POSIX shell command: in single quotes, each ' written '\''.
std::string shell_quote(const std::string& text);

// "a, b, c"
std::string join(const std::vector<int>& v, const char* sep = ", ");

Result<Exported> export_megatron(const Plan& p, const model::Model& m, const cluster::Cluster& c,
                                 const ExportInputs& in);
Result<Exported> export_deepspeed(const Plan& p, const model::Model& m, const cluster::Cluster& c,
                                  const ExportInputs& in);
Result<Exported> export_torchrun(const Plan& p, const model::Model& m, const cluster::Cluster& c,
                                 const ExportInputs& in);

}  // namespace hetplan::plan::detail
