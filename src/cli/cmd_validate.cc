// hetplan validate: checks a plan file against a model and a cluster without simulating it.
#include <fmt/format.h>

#include <memory>

#include "commands.h"
#include "hetplan/cluster/cluster_file.h"
#include "hetplan/model/zoo.h"
#include "plan_args.h"
#include "reports.h"

namespace hetplan::cli {
namespace {

struct ValidateArgs {
  std::string model = "gpt3-1.3b";
  std::string cluster = "dgx-a100:2";
  std::string plan_file;
};

int run_validate(const ValidateArgs& a) {
  auto m = model::load_model(a.model, "--model");
  if (!m) return report_error(m.error().message);
  auto c = cluster::load_cluster(a.cluster, "--cluster");
  if (!c) return report_error(c.error().message);
  auto p = plan_from_args(a.plan_file, "", "", *m, a.model, *c);
  if (!p) return report_error(p.error().message);
  fmt::print("{}: valid for {} on {} ({})\n", a.plan_file, m->name, c->name, plan_label(*p));
  return 0;
}

}  // namespace

Action add_validate_command(CLI::App& app) {
  auto args = std::make_shared<ValidateArgs>();
  auto* cmd = app.add_subcommand(
      "validate", "Check a plan file against a model and a cluster (stage-level or op-level)");
  cmd->add_option("--plan,-p", args->plan_file, "The plan JSON file")->required();
  cmd->add_option("--model,-m", args->model,
                  "Model: preset name, family spec (gpt:layers=..) or graph .json")
      ->capture_default_str();
  cmd->add_option("--cluster,-c", args->cluster, "Cluster: preset name (dgx-a100:4) or YAML file")
      ->capture_default_str();
  return [args] { return run_validate(*args); };
}

}  // namespace hetplan::cli
