// A plan taken to the engine a user trains with: the launch scripts, environment and config files
// that realise it on Megatron-LM, DeepSpeed, or hetplan's own runtime under torchrun, and what the
// engine cannot express of it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hetplan/cluster/cluster.h"
#include "hetplan/core/error.h"
#include "hetplan/model/model.h"
#include "hetplan/plan/plan.h"

namespace hetplan::plan {

// megatron: Megatron-LM's pretrain_*.py under torchrun; deepspeed: the deepspeed launcher with a
// DeepSpeed config; torchrun: `hetplan run` under torchrun (the plan as written).
enum class Engine { megatron, deepspeed, torchrun };
const char* to_string(Engine e);  // "megatron", "deepspeed", "torchrun"
std::optional<Engine> engine_from_string(std::string_view s);
std::string engine_names();  // "megatron|deepspeed|torchrun"

struct ExportInputs {
  std::string model_spec;               // torchrun: the --model `hetplan run` loads
  std::string cluster_spec;             // torchrun: the --cluster it loads
  std::string plan_file = "plan.json";  // torchrun: the plan's file, beside the script
  int master_port = 29500;              // the default of the scripts' MASTER_PORT
};

struct ExportedFile {
  std::string name;  // relative to the output directory
  std::string text;
  bool executable = false;
};

struct Exported {
  std::vector<ExportedFile> files;
  // What the engine cannot express of the plan, each saying what the files do instead; empty
  // when they realise the plan as it stands.
  std::vector<std::string> differences;
};

// The files that realise plan p (valid for m and c) on engine e. An error when the engine has no
// form for it at all (Megatron-LM and a CNN, an op-level plan); the message names the engine.
Result<Exported> export_plan(Engine e, const Plan& p, const model::Model& m,
                             const cluster::Cluster& c, const ExportInputs& in);

// The plan's devices in the order torchrun numbers its workers when each of the plan's nodes runs
// one torchrun (node_rank in node order) with one worker per device it uses: node by node in the
// cluster's order, each node's devices ascending.
std::vector<int> devices_node_by_node(const Plan& p, const cluster::Cluster& c);

}  // namespace hetplan::plan
