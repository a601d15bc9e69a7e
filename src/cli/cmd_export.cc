// hetplan export: a plan file as the launch scripts and config files of the engine a user trains
// with (Megatron-LM, DeepSpeed) or of hetplan's own runtime under torchrun.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <memory>

#include "commands.h"
#include "hetplan/plan/export.h"
#include "plan_args.h"
#ifdef HETPLAN_WITH_RUNTIME
#include "hetplan/plan/run_form.h"
#include "hetplan/runtime/run.h"
#endif

namespace hetplan::cli {
namespace {

struct ExportArgs {
  std::string plan_file;
  std::string engine;
  std::string out_dir;
  ModelClusterArgs inputs{"gpt3-1.3b", "dgx-a100:2"};
  int master_port = 29500;
  bool exact = false;
};

// Why hetplan's runtime would not run the plan at its full scale, as differences of the torchrun
// launch (the runtime is hetplan-runtime's: a build without it execs that).
Result<std::vector<std::string>> runtime_refusals(const model::Model& m, const plan::Plan& p) {
#ifdef HETPLAN_WITH_RUNTIME
  const int ranks = static_cast<int>(plan::plan_devices(p).size());
  const plan::Plan form = runtime::executable_form(m, p, ranks).plan;
  std::vector<std::string> out;
  for (const auto& why : runtime::executable_problems(m, form, ranks))
    out.push_back("hetplan run refuses it: " + why);
  return out;
#else
  (void)m;
  (void)p;
  return Error{"export --to torchrun: " + exec_runtime_binary()};
#endif
}

int run_export(const ExportArgs& a) {
  namespace fs = std::filesystem;
  const auto engine = plan::engine_from_string(a.engine);
  if (!engine)
    return report_error(
        fmt::format("--to: expected {}, got \"{}\"", plan::engine_names(), a.engine));
  if (a.master_port < 1 || a.master_port > 65535)
    return report_error(
        fmt::format("--master-port: expected a TCP port, 1 to 65535, got {}", a.master_port));
  std::error_code ec;
  if (fs::exists(a.out_dir, ec) && !fs::is_directory(a.out_dir, ec))
    return report_error(fmt::format("--out: {} is not a directory", a.out_dir));
  auto in = read_plan_with_inputs(a.plan_file, a.inputs);
  if (!in) return report_error(in.error().message);
  plan::ExportInputs opts;
  // A model or cluster file, named so that the scripts find it from any directory.
  auto spec = [&](const std::string& text) {
    return fs::is_regular_file(text, ec) ? fs::absolute(text, ec).string() : text;
  };
  opts.model_spec = spec(in->model_spec);
  opts.cluster_spec = spec(in->cluster_spec);
  opts.master_port = a.master_port;
  auto exported = plan::export_plan(*engine, in->plan, in->model, in->cluster, opts);
  if (!exported) return report_error(exported.error().message);
  if (*engine == plan::Engine::torchrun) {
    auto refusals = runtime_refusals(in->model, in->plan);
    if (!refusals) return report_error(refusals.error().message);
    exported->differences.insert(exported->differences.end(), refusals->begin(), refusals->end());
  }
  const auto& diff = exported->differences;
  if (a.exact && !diff.empty()) {
    std::fprintf(stderr, "hetplan: error: --exact: %s cannot express the plan as written:\n",
                 a.engine.c_str());
    for (const auto& d : diff) std::fprintf(stderr, "  - %s\n", d.c_str());
    return 1;
  }
  fs::create_directories(a.out_dir, ec);
  if (ec) return report_error(fmt::format("--out: cannot create {}: {}", a.out_dir, ec.message()));
  for (const auto& f : exported->files) {
    const fs::path path = fs::path(a.out_dir) / f.name;
    if (!write_output_file(path.string(), f.text)) return 2;
    if (f.executable)
      fs::permissions(path, fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec,
                      fs::perm_options::add, ec);
    fmt::print("wrote {}\n", path.string());
  }
  if (diff.empty()) {
    fmt::print("{} realises the plan as written\n", a.engine);
  } else {
    fmt::print("{} does not express all of the plan:\n", a.engine);
    for (const auto& d : diff) fmt::print("  - {}\n", d);
  }
  return 0;
}

}  // namespace

Action add_export_command(CLI::App& app) {
  auto args = std::make_shared<ExportArgs>();
  auto* cmd = app.add_subcommand(
      "export",
      "Write the launch scripts and config files that run a plan on Megatron-LM, DeepSpeed, or "
      "hetplan's runtime under torchrun, and say what the engine cannot express of it");
  cmd->add_option("--plan,-p", args->plan_file, "The plan JSON file")->required();
  cmd->add_option("--to", args->engine, "The engine: " + plan::engine_names())->required();
  cmd->add_option("--out,-o", args->out_dir,
                  "The directory to write the files in (created if missing)")
      ->required();
  auto* model =
      cmd->add_option("--model,-m", args->inputs.model, "Model (default: the plan's `model`)");
  auto* cluster = cmd->add_option("--cluster,-c", args->inputs.cluster,
                                  "Cluster (default: the plan's `cluster`)");
  cmd->add_option("--master-port", args->master_port,
                  "The scripts' default MASTER_PORT (the rendezvous port on node 0)")
      ->capture_default_str();
  cmd->add_flag("--exact", args->exact,
                "Write nothing and exit 1 when the engine cannot express the plan as written");
  return [args, model, cluster] {
    args->inputs.model_given = model->count() > 0;
    args->inputs.cluster_given = cluster->count() > 0;
    return run_export(*args);
  };
}

}  // namespace hetplan::cli
