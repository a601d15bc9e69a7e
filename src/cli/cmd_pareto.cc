// hetplan pareto: the frontier of iteration time against peak memory (Frontier Tracking).
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "hetplan/cluster/cluster_file.h"
#include "hetplan/model/zoo.h"
#include "hetplan/plan/plan_json.h"
#include "hetplan/search/search.h"
#include "reports.h"

namespace hetplan::cli {
namespace {

struct ParetoArgs {
  std::string model = "gpt3-1.3b";
  std::string cluster = "hap-mixed";
  std::int64_t global_batch = 512;
  double epsilon = 0.03;
  double time_limit_s = 0;
  int threads = 1;
  std::string report_file;
  bool json = false;
  bool verbose = false;
};

std::string describe(const plan::Plan& p) {
  std::size_t replicas = 0;
  for (const auto& st : p.stages) replicas += st.replicas.size();
  return fmt::format("{} stages, {} replicas, {} micro-batches, recompute {}, zero {}",
                     p.stages.size(), replicas, p.num_microbatches, cost::to_string(p.recompute),
                     p.zero_stage);
}

int run_pareto(const ParetoArgs& a) {
  auto m = model::load_model(a.model, "--model");
  if (!m) return report_error(m.error().message);
  auto c = cluster::load_cluster(a.cluster, "--cluster");
  if (!c) return report_error(c.error().message);
  if (a.global_batch < 1) return report_error("--global-batch: expected a positive integer");
  if (!(a.epsilon > 0 && a.epsilon < 1)) return report_error("--epsilon: expected a number in (0, 1)");
  if (a.time_limit_s < 0) return report_error("--time-limit: expected seconds >= 0");
  if (a.threads < 1) return report_error("--threads: expected at least 1");
  search::SearchOptions opts;
  opts.global_batch = a.global_batch;
  opts.time_limit_s = a.time_limit_s;
  opts.threads = a.threads;
  if (a.verbose || isatty(fileno(stderr)))
    opts.progress = [](const std::string& line) {
      std::fprintf(stderr, "hetplan: %s\n", line.c_str());
    };
  auto res = search::find_frontier(*m, *c, opts, a.epsilon);
  if (!res) return report_error(res.error().message);
  if (!a.report_file.empty()) {
    const int rc = write_pareto_report(a.report_file, *m, *c, *res);
    if (rc) return rc;
  }
  if (a.json) {
    nlohmann::ordered_json j;
    j["model"] = m->name;
    j["cluster"] = c->name;
    j["global_batch"] = a.global_batch;
    j["search_time_s"] = res->search_time_s;
    j["timed_out"] = res->timed_out;
    j["plans_simulated"] = res->plans_simulated;
    auto pts = nlohmann::ordered_json::array();
    for (const auto& e : res->points)
      pts.push_back({{"iteration_time_s", e.iteration_time_s},
                     {"max_peak_bytes", e.max_peak_bytes},
                     {"samples_per_s", e.samples_per_s},
                     {"plan", plan::to_json(e.plan)}});
    j["points"] = pts;
    std::fputs((j.dump(2) + "\n").c_str(), stdout);
    return 0;
  }
  fmt::print("{} on {}, global batch {}: {} frontier points ({} plans simulated in {:.2f} s{})\n\n",
             m->name, c->name, a.global_batch, res->points.size(), res->plans_simulated,
             res->search_time_s, res->timed_out ? ", stopped by the time limit" : "");
  fmt::print("{:>14} {:>14}  {}\n", "iteration (s)", "max peak GiB", "plan");
  for (const auto& e : res->points)
    fmt::print("{:>14.4g} {:>14.2f}  {}\n", e.iteration_time_s, e.max_peak_bytes / (1 << 30),
               describe(e.plan));
  return 0;
}

}  // namespace

Action add_pareto_command(CLI::App& app) {
  auto args = std::make_shared<ParetoArgs>();
  auto* cmd = app.add_subcommand(
      "pareto", "The frontier of iteration time against peak memory (Frontier Tracking)");
  cmd->add_option("--model,-m", args->model,
                  "Model: preset name, family spec (gpt:layers=..) or graph .json")
      ->capture_default_str();
  cmd->add_option("--cluster,-c", args->cluster, "Cluster: preset name (dgx-a100:4) or YAML file")
      ->capture_default_str();
  cmd->add_option("--global-batch,-b", args->global_batch, "Samples per iteration")
      ->capture_default_str();
  cmd->add_option("--epsilon", args->epsilon,
                  "Keep a point only if no kept point is within this factor on both axes")
      ->capture_default_str();
  cmd->add_option("--time-limit", args->time_limit_s, "Seconds (0: no limit)")
      ->capture_default_str();
  cmd->add_option("--threads", args->threads, "Plans simulated in parallel")->capture_default_str();
  cmd->add_option("--report", args->report_file, "Write an HTML report to FILE");
  cmd->add_flag("--json", args->json, "Print one JSON object instead of the table");
  cmd->add_flag("--verbose,-v", args->verbose, "Show search progress on stderr");
  return [args] { return run_pareto(*args); };
}

}  // namespace hetplan::cli
