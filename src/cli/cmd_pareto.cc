// hetplan pareto: the frontier of iteration time against peak memory (Frontier Tracking).
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "hetplan/cluster/cluster_file.h"
#include "hetplan/plan/plan_json.h"
#include "hetplan/search/search.h"
#include "plan_args.h"
#include "reports.h"
#include "search_args.h"

namespace hetplan::cli {
namespace {

struct ParetoArgs : SearchArgs {
  double epsilon = 0.03;
};

int run_pareto(const ParetoArgs& a) {
  auto m = load_search_model(a);
  if (!m) return report_error(m.error().message);
  auto c = cluster::load_cluster(a.cluster, "--cluster");
  if (!c) return report_error(c.error().message);
  if (auto bad = precision_for_cluster(a, *c); !bad.empty()) return report_error(bad);
  search::SearchOptions opts;
  if (auto bad = fill_search_options(a, opts); !bad.empty()) return report_error(bad);
  if (auto bad = set_runnable(a, *m, opts); !bad.empty()) return report_error(bad);
  if (!(a.epsilon > 0 && a.epsilon < 1))
    return report_error("--epsilon: expected a number in (0, 1)");
  auto res = search::find_frontier(*m, *c, opts, a.epsilon);
  if (!res) return report_error(res.error().message);
  if (!a.report_file.empty()) {
    if (opts.progress)
      opts.progress("report: simulating the fastest plan; writing " + a.report_file);
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
    for (const auto& e : res->points) {
      pts.push_back({{"iteration_time_s", e.iteration_time_s},
                     {"max_peak_bytes", e.max_peak_bytes},
                     {"samples_per_s", e.samples_per_s},
                     {"plan", plan::to_json(e.plan)}});
    }
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
               plan_label(e.plan));
  return 0;
}

}  // namespace

Action add_pareto_command(CLI::App& app) {
  auto args = std::make_shared<ParetoArgs>();
  auto* cmd = app.add_subcommand(
      "pareto", "The frontier of iteration time against peak memory (Frontier Tracking)");
  add_problem_options(cmd, *args);
  cmd->add_option("--epsilon", args->epsilon,
                  "Keep a point only if no kept point is within this factor on both axes")
      ->capture_default_str();
  add_search_options(cmd, *args);
  return [args] { return run_pareto(*args); };
}

}  // namespace hetplan::cli
