// hetplan validate: checks a plan file against a model and a cluster without simulating it.
#include <fmt/format.h>

#include <memory>

#include "commands.h"
#include "plan_args.h"
#include "reports.h"

namespace hetplan::cli {
namespace {

struct ValidateArgs {
  // The plan's own model and cluster unless given; these where the plan names none.
  ModelClusterArgs inputs{"gpt3-1.3b", "dgx-a100:2"};
  std::string plan_file;
};

int run_validate(const ValidateArgs& a) {
  auto read = read_plan_with_inputs(a.plan_file, a.inputs);
  if (!read) return report_error(read.error().message);
  fmt::print("{}: valid for {} on {} ({})\n", a.plan_file, read->model.name, read->cluster.name,
             plan_label(read->plan));
  return 0;
}

}  // namespace

Action add_validate_command(CLI::App& app) {
  auto args = std::make_shared<ValidateArgs>();
  auto* cmd = app.add_subcommand(
      "validate", "Check a plan file against a model and a cluster (stage-level or op-level)");
  cmd->add_option("--plan,-p", args->plan_file, "The plan JSON file")->required();
  auto* model = cmd->add_option(
      "--model,-m", args->inputs.model,
      "Model: preset name, family spec (gpt:layers=..) or graph .json (default: the plan's "
      "`model`, else gpt3-1.3b)");
  auto* cluster = cmd->add_option(
      "--cluster,-c", args->inputs.cluster,
      "Cluster: preset name (dgx-a100:4) or YAML file (default: the plan's `cluster`, else "
      "dgx-a100:2)");
  return [args, model, cluster] {
    args->inputs.model_given = model->count() > 0;
    args->inputs.cluster_given = cluster->count() > 0;
    return run_validate(*args);
  };
}

}  // namespace hetplan::cli
