// hetplan plan: search for the fastest plan that fits, next to the three baselines.
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
#include "hetplan/sim/simulate.h"
#include "reports.h"
#include "result_json.h"

namespace hetplan::cli {
namespace {

struct PlanArgs {
  std::string model = "gpt3-1.3b";
  std::string cluster = "hap-mixed";
  std::int64_t global_batch = 512;
  std::string algo = "auto";
  std::string objective = "time";
  double time_limit_s = 0;
  int threads = 1;
  std::uint64_t seed = 1;
  std::string out_file;
  std::string report_file;
  std::string calibration_file;
  bool json = false;
  bool verbose = false;
};

nlohmann::ordered_json baselines_json(const search::SearchResult& res) {
  auto arr = nlohmann::ordered_json::array();
  for (const auto& b : res.baselines) {
    nlohmann::ordered_json j;
    j["name"] = b.name;
    if (b.best.ok) {
      j["iteration_time_s"] = b.best.iteration_time_s;
    } else {
      j["iteration_time_s"] = nullptr;
      j["error"] = b.best.error;
    }
    j["fits"] = b.best.ok && b.best.fits;
    arr.push_back(j);
  }
  return arr;
}

void print_summary(const model::Model& m, const cluster::Cluster& c,
                   const search::SearchResult& res, const sim::SimResult& r) {
  const auto& p = res.best.plan;
  fmt::print("model      {} ({:.3g}B parameters), global batch {}\n", m.name,
             static_cast<double>(m.parameters()) / 1e9, p.global_batch);
  fmt::print("cluster    {} ({} devices, {} used)\n", c.name, c.num_devices(), r.devices_used);
  fmt::print("planner    {} ({} plans simulated in {:.2f} s{})\n", res.planner,
             res.plans_simulated, res.search_time_s,
             res.timed_out ? ", stopped by the time limit: best found so far" : "");
  fmt::print("plan       {} stages, {} micro-batches, schedule {}, recompute {}, zero {}\n",
             p.stages.size(), p.num_microbatches, plan::to_string(p.schedule),
             cost::to_string(p.recompute), p.zero_stage);
  for (std::size_t s = 0; s < p.stages.size(); ++s) {
    const auto& st = p.stages[s];
    const auto& r0 = st.replicas.front();
    fmt::print("  stage {:<3} layers {:>3}-{:<3} {:>4} x tp{} on {} ...  ({} replicas)\n", s,
               st.first_layer, st.first_layer + st.num_layers - 1, st.replicas.size(),
               r0.devices.size(), c.devices[r0.devices.front()].name, st.replicas.size());
  }
  fmt::print("iteration  {:.4g} s, {:.1f} samples/s, MFU {:.1f}%\n", r.iteration_time.value,
             r.samples_per_s, 100 * r.mfu);
  fmt::print("memory     max peak {:.1f} GiB: {}\n", r.max_peak_memory.value / (1 << 30),
             r.fits ? "fits" : "DOES NOT FIT");
  fmt::print("\n{:<18} {:>14} {:>8} {:>10}\n", "baseline", "iteration (s)", "fits", "speed-up");
  for (const auto& b : res.baselines) {
    if (!b.best.ok) {
      fmt::print("{:<18} {:>14} {:>8} {:>10}\n", b.name, "-", "no", "-");
      continue;
    }
    fmt::print("{:<18} {:>14.4g} {:>8} {:>9.2f}x\n", b.name, b.best.iteration_time_s,
               b.best.fits ? "yes" : "no", b.best.iteration_time_s / r.iteration_time.value);
  }
}

int run_plan(const PlanArgs& a) {
  auto m = model::load_model(a.model, "--model");
  if (!m) return report_error(m.error().message);
  auto c = cluster::load_cluster(a.cluster, "--cluster");
  if (!c) return report_error(c.error().message);
  auto algo = search::algo_from_string(a.algo);
  if (!algo) return report_error("--algo: expected one of " + search::algo_names() + ", got '" +
                                 a.algo + "'");
  search::SearchOptions opts;
  if (a.objective == "time") {
    opts.objective = search::Objective::time;
  } else if (a.objective == "memory") {
    opts.objective = search::Objective::memory;
  } else {
    return report_error("--objective: expected time|memory, got '" + a.objective + "'");
  }
  if (a.global_batch < 1) return report_error("--global-batch: expected a positive integer");
  if (a.time_limit_s < 0) return report_error("--time-limit: expected seconds >= 0");
  if (a.threads < 1) return report_error("--threads: expected at least 1");
  opts.global_batch = a.global_batch;
  opts.time_limit_s = a.time_limit_s;
  opts.threads = a.threads;
  opts.seed = a.seed;
  if (!a.calibration_file.empty()) {
    auto prof = cost::read_calibration_profile(a.calibration_file);
    if (!prof) return report_error(prof.error().message);
    opts.sim.profile = std::make_shared<const cost::CalibrationProfile>(std::move(*prof));
  }
  if (a.verbose || isatty(fileno(stderr)))
    opts.progress = [](const std::string& line) {
      std::fprintf(stderr, "hetplan: %s\n", line.c_str());
    };
  auto res = search::find_plan(*m, *c, *algo, opts);
  if (!res) return report_error(res.error().message);
  if (!res->best.fits)
    return report_error(m->name + " on " + c->name + ": " +
                        search::shortfall_message(*c, res->best));
  sim::SimOptions sopts = opts.sim;
  sopts.record_events = !a.report_file.empty();
  auto r = sim::simulate(*m, *c, res->best.plan, sopts);
  if (!r) return report_error(r.error().message);
  if (!a.out_file.empty() && !write_output_file(a.out_file, plan::to_json_text(res->best.plan)))
    return 2;
  if (!a.report_file.empty()) {
    // The report plots the time/memory frontier too; if none is found it says so.
    auto front = search::find_frontier(*m, *c, opts);
    const int rc = write_plan_report(a.report_file, *m, *c, *res, *r, front ? &*front : nullptr);
    if (rc) return rc;
  }
  if (a.json) {
    auto j = sim_result_json(*m, res->best.plan, *r);
    j["search_time_s"] = res->search_time_s;
    j["timed_out"] = res->timed_out;
    j["plans_simulated"] = res->plans_simulated;
    j["plan_fingerprint"] = res->best.fingerprint;
    j["baselines"] = baselines_json(*res);
    j["plan"] = plan::to_json(res->best.plan);
    std::fputs((j.dump(2) + "\n").c_str(), stdout);
  } else {
    print_summary(*m, *c, *res, *r);
  }
  return 0;
}

}  // namespace

Action add_plan_command(CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  auto* cmd = app.add_subcommand(
      "plan", "Find the fastest plan that fits the cluster, compared with three baselines");
  cmd->add_option("--model,-m", args->model,
                  "Model: preset name, family spec (gpt:layers=..) or graph .json")
      ->capture_default_str();
  cmd->add_option("--cluster,-c", args->cluster, "Cluster: preset name (dgx-a100:4) or YAML file")
      ->capture_default_str();
  cmd->add_option("--global-batch,-b", args->global_batch, "Samples per iteration")
      ->capture_default_str();
  cmd->add_option("--algo", args->algo, "Planner: " + search::algo_names())->capture_default_str();
  cmd->add_option("--objective", args->objective, "time|memory")->capture_default_str();
  cmd->add_option("--time-limit", args->time_limit_s,
                  "Seconds; return the best plan found by then (0: no limit)")
      ->capture_default_str();
  cmd->add_option("--threads", args->threads, "Plans simulated in parallel")->capture_default_str();
  cmd->add_option("--seed", args->seed, "Seed for tie-breaking")->capture_default_str();
  cmd->add_option("--out,-o", args->out_file, "Write the plan (JSON) to FILE");
  cmd->add_option("--report", args->report_file, "Write an HTML report to FILE");
  cmd->add_option("--calibration", args->calibration_file, "A measured calibration profile (JSON)");
  cmd->add_flag("--json", args->json, "Print one JSON object instead of the summary");
  cmd->add_flag("--verbose,-v", args->verbose, "Show search progress on stderr");
  return [args] { return run_plan(*args); };
}

}  // namespace hetplan::cli
