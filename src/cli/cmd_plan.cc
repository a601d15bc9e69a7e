// hetplan plan: search for the fastest plan that fits, next to the three baselines.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "commands.h"
#include "hetplan/cluster/cluster_file.h"
#include "hetplan/cluster/subcluster.h"
#include "hetplan/plan/plan_json.h"
#include "hetplan/plan/renumber.h"
#include "hetplan/search/rent.h"
#include "hetplan/search/search.h"
#include "hetplan/sim/simulate.h"
#include "plan_args.h"
#include "reports.h"
#include "result_json.h"
#include "search_args.h"

namespace hetplan::cli {
namespace {

struct PlanArgs : SearchArgs {
  std::string algo = "auto";
  std::string objective = "time";
  std::uint64_t seed = 1;
  std::string out_file;
  std::string calibration_file;
  bool dlcp = false;
  double allow_lossy_sync = 0;
  // Renting (search/rent.h): a budget in USD per hour and a limit on the iteration time (0: none).
  double budget_per_hour = 0;
  double max_iteration_time = 0;
  // replan: the plan a run used, the devices it lost, and whether --model and --cluster were
  // given (otherwise the plan's own).
  bool replan = false;
  std::string old_plan_file;
  std::string remove;
  bool model_given = false, cluster_given = false;
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

// A stage's replicas in the summary: "tp4" where every op takes its tensor split (Megatron's
// form), "spmd4" where the plan's op_overrides split some by batch or replicate them (HAP's).
std::string replica_form(const plan::Plan& p, const plan::Replica& r) {
  return fmt::format("{}{}", p.op_overrides.empty() ? "tp" : "spmd", r.devices.size());
}

// For an SPMD stage: how many of its ops take each split (as op_overrides name them), the empty
// ones left out, e.g. "; ops by split: tensor 40, batch 12".
std::string split_counts(const model::Model& m, const plan::Plan& p, const plan::Stage& st,
                         const plan::Replica& r) {
  if (p.op_overrides.empty() || r.devices.size() < 2) return "";
  std::map<plan::SplitKind, int> count;
  for (int l = st.first_layer; l < st.first_layer + st.num_layers; ++l) {
    const model::Layer& layer = m.layers[static_cast<std::size_t>(l)];
    for (int op = layer.first_op; op < layer.first_op + layer.num_ops; ++op)
      ++count[plan::split_of(p, m.ops[static_cast<std::size_t>(op)].name)];
  }
  std::string out;
  for (const auto& [split, n] : count)
    out +=
        fmt::format("{} {} {}", out.empty() ? "; ops by split:" : ",", plan::to_string(split), n);
  return out;
}

void print_summary(const model::Model& m, const cluster::Cluster& c,
                   const search::SearchResult& res, const sim::SimResult& r) {
  const auto& p = res.best.plan;
  fmt::print("model      {} ({:.3g}B parameters), global batch {}\n", m.name,
             static_cast<double>(m.parameters()) / 1e9, p.global_batch);
  fmt::print("cluster    {} ({} devices, {} used)\n", c.name, c.num_devices(), r.devices_used);
  for (const auto& alias : c.type_aliases)
    fmt::print("           '{}' is taken to be {}\n", alias.written, alias.canonical);
  fmt::print("planner    {} ({} plans simulated in {:.2f} s{})\n", res.planner, res.plans_simulated,
             res.search_time_s,
             res.timed_out ? ", stopped by the time limit: best found so far" : "");
  if (p.is_op_level()) {
    fmt::print("plan       {}\n", plan_label(p));
    for (std::size_t g = 0; g < p.op_groups.size(); ++g) {
      const auto& og = p.op_groups[g];
      std::string devs;
      for (std::size_t k = 0; k < og.devices.size() && k < 6; ++k)
        devs += (k ? "," : "") + c.devices[og.devices[k]].name;
      if (og.devices.size() > 6) devs += fmt::format(",.. ({})", og.devices.size());
      fmt::print("  group {:<3} {:>4} ops ({} .. {})  {} on {}{}\n", g, og.ops.size(),
                 og.ops.front(), og.ops.back(), plan::to_string(og.mode), devs,
                 og.mode == plan::GroupMode::replicate
                     ? fmt::format(", {}", plan::to_string(og.sync))
                     : "");
    }
  } else {
    fmt::print("plan       {} stages, {} micro-batches, schedule {}, recompute {}, zero {}\n",
               p.stages.size(), p.num_microbatches, plan::to_string(p.schedule),
               cost::to_string(p.recompute), p.zero_stage);
  }
  for (std::size_t s = 0; s < p.stages.size(); ++s) {
    const auto& st = p.stages[s];
    const auto& r0 = st.replicas.front();
    fmt::print("  stage {:<3} layers {:>3}-{:<3} {:>4} x {} on {} ...  ({} replicas){}\n", s,
               st.first_layer, st.first_layer + st.num_layers - 1, st.replicas.size(),
               replica_form(p, r0), c.devices[r0.devices.front()].name, st.replicas.size(),
               split_counts(m, p, st, r0));
  }
  fmt::print("iteration  {:.4g} s, {:.1f} samples/s, MFU {:.1f}%\n", r.iteration_time.value,
             r.samples_per_s, 100 * r.mfu);
  fmt::print("memory     max peak {:.1f} GiB: {}\n", r.max_peak_memory.value / (1 << 30),
             r.fits ? "fits" : "DOES NOT FIT");
  if (const std::string samples = samples_by_device_type_text(p, c); !samples.empty())
    fmt::print("samples    {} (of {} per iteration)\n", samples, p.global_batch);
  fmt::print("price      {}\n", price_text(c, r));
  if (res.plain_transport.ok)
    fmt::print(
        "gradients  {}; {:.2f}x over the same plan without (DLCP; simulated, `hetplan run` sends "
        "gradients as usual)\n",
        gradient_transport_text(p, r),
        res.plain_transport.iteration_time_s / r.iteration_time.value);
  fmt::print("\n{:<18} {:>14} {:>8} {:>10}\n", "baseline", "iteration (s)", "fits", "speed-up");
  for (const auto& b : res.baselines) {
    if (!b.best.ok) {
      // Left out or stopped under a time limit, or no plan of its kind could be built.
      const bool not_run = b.best.error.rfind("not run", 0) == 0;
      fmt::print("{:<18} {:>14} {:>8} {:>10}\n", b.name, "-",
                 not_run          ? "not run"
                 : b.best.stopped ? "stopped"
                                  : "no",
                 "-");
      continue;
    }
    fmt::print("{:<18} {:>14.4g} {:>8} {:>9.2f}x\n", b.name, b.best.iteration_time_s,
               b.best.fits ? "yes" : "no", b.best.iteration_time_s / r.iteration_time.value);
  }
}

// What --objective cost (or a budget) chose, against the fastest plan, and every subset searched.
void print_rent(const cluster::Cluster& c, const search::RentResult& rent, const PlanArgs& a,
                std::int64_t global_batch) {
  const auto& chosen = rent.subsets[rent.chosen];
  const auto& fastest = rent.subsets[rent.fastest];
  const double per_iter = chosen.per_iteration.value;
  fmt::print(
      "\nobjective  {}: {} at ${:.2f} per hour: ${:.4g} per iteration, {:.4g} samples per "
      "dollar\n",
      a.objective, search::subset_label(c, chosen.used), chosen.price.value, per_iter,
      per_iter > 0 ? static_cast<double>(global_batch) / per_iter : 0.0);
  fmt::print(
      "fastest    {:.4g} s per iteration, ${:.4g} per iteration, on {} (${:.2f} per "
      "hour){}\n",
      fastest.iteration_time_s, fastest.per_iteration.value, search::subset_label(c, fastest.used),
      fastest.price.value, rent.fastest == rent.chosen ? ": the plan above" : "");
  const std::vector<int> unused = cluster::other_devices(c, chosen.used);
  if (!unused.empty()) {
    std::string why;
    if (rent.chosen != rent.fastest && a.objective != "time")
      why = fmt::format(
          "{:.1f}% fewer dollars per iteration than the fastest plan, {:.2f}x its "
          "iteration time",
          100 * (1 - per_iter / fastest.per_iteration.value),
          chosen.iteration_time_s / fastest.iteration_time_s);
    else if (a.budget_per_hour > 0 && c.price_per_hour().value > a.budget_per_hour)
      why = fmt::format("every device together costs ${:.2f} per hour, over the budget of ${:.2f}",
                        c.price_per_hour().value, a.budget_per_hour);
    else if (rent.chosen != rent.fastest)
      why = fmt::format("within {:g}% of the fastest plan's time and cheaper",
                        100 * search::kRentTolerance);
    else
      why = "the fastest plan does not use them";
    fmt::print("unused     {}: {}\n", search::subset_label(c, unused), why);
  }
  fmt::print("\n{:<48} {:>13} {:>9} {:>12}  {}\n", "devices offered", "iteration (s)", "$/hour",
             "$/iteration", "planner (GPUs used)");
  for (int i = 0; i < static_cast<int>(rent.subsets.size()); ++i) {
    const auto& p = rent.subsets[i];
    if (!p.fits) {
      fmt::print("{:<48} {:>13} {:>9} {:>12}  {}\n", p.label, "-", "-", "-", p.note);
      continue;
    }
    std::string mark = fmt::format("{} ({})", p.planner, p.used.size());
    if (i == rent.chosen) mark += ", chosen";
    if (i == rent.fastest) mark += ", fastest";
    if (!p.note.empty()) mark += ", " + p.note;
    fmt::print("{:<48} {:>13.4g} {:>9.2f} {:>12.4g}  {}\n", p.label, p.iteration_time_s,
               p.price.value, p.per_iteration.value, mark);
  }
}

nlohmann::ordered_json rent_json(const search::RentResult& rent, const PlanArgs& a) {
  nlohmann::ordered_json j;
  j["objective"] = a.objective;
  j["budget_per_hour_usd"] = a.budget_per_hour > 0 ? nlohmann::ordered_json(a.budget_per_hour)
                                                   : nlohmann::ordered_json(nullptr);
  j["max_iteration_time_s"] = a.max_iteration_time > 0
                                  ? nlohmann::ordered_json(a.max_iteration_time)
                                  : nlohmann::ordered_json(nullptr);
  j["chosen"] = rent.chosen;
  j["fastest"] = rent.fastest;
  j["cheapest"] = rent.cheapest;
  auto subsets = nlohmann::ordered_json::array();
  for (const auto& p : rent.subsets) {
    nlohmann::ordered_json s;
    s["devices"] = p.label;
    s["device_ids"] = p.devices;
    s["searched"] = p.searched;
    s["fits"] = p.fits;
    if (p.fits) {
      s["planner"] = p.planner;
      s["iteration_time_s"] = p.iteration_time_s;
      s["used_device_ids"] = p.used;
      s["usd_per_hour"] = p.price.value;
      s["usd_per_iteration"] = p.per_iteration.value;
    }
    s["note"] = p.note;
    subsets.push_back(s);
  }
  j["subsets"] = subsets;
  return j;
}

int run_plan(PlanArgs a) {
  std::optional<plan::Plan> old_plan;  // replan: the plan the run used
  if (a.replan) {
    // The run's model, cluster and global batch, from the plan unless given.
    auto old = plan::read_plan_file(a.old_plan_file);
    if (!old) return report_error(old.error().message);
    old_plan = *old;
    auto from_plan = [&](std::string& arg, const std::string& value, const char* what) {
      if (value.empty())
        return fmt::format("--{0}: expected the {0} ({1} names none)", what, a.old_plan_file);
      arg = value;
      return std::string();
    };
    if (!a.model_given)
      if (auto bad = from_plan(a.model, old->model, "model"); !bad.empty())
        return report_error(bad);
    if (!a.cluster_given)
      if (auto bad = from_plan(a.cluster, old->cluster, "cluster"); !bad.empty())
        return report_error(bad);
    a.global_batch = old->global_batch;
    // The run resumed trains on in its precision unless --precision says otherwise.
    if (a.precision.empty() && old->precision) a.precision = plan::precision_name(*old->precision);
    // And on the same engine, unless --adam says otherwise.
    if (a.adam.empty()) a.adam = plan::adam_name(old->adam);
    if (a.loss.empty()) a.loss = plan::loss_name(old->loss);
    if (a.metrics < 0) a.metrics = old->metrics;
    a.resumes = &*old_plan;
  }
  auto m = load_search_model(a);
  if (!m) return report_error(m.error().message);
  auto whole = cluster::load_cluster(a.cluster, "--cluster");
  if (!whole) return report_error(whole.error().message);
  if (auto bad = precision_for_cluster(a, *whole); !bad.empty()) return report_error(bad);
  std::shared_ptr<const cost::CalibrationProfile> profile;
  if (!a.calibration_file.empty()) {
    auto prof =
        calibration_from_args(a.calibration_file, *whole, search::SearchOptions().sim.network);
    if (!prof) return report_error(prof.error().message);
    profile = std::move(*prof);
  }
  // replan plans for what is left of the cluster and names the plan's devices in the whole
  // cluster's ids (the fabric is the same, so it simulates the same there).
  cluster::Subcluster left{*whole, {}};
  if (a.replan && !a.remove.empty()) {
    auto removed = cluster::parse_device_list(*whole, a.remove, "--remove");
    if (!removed) return report_error(removed.error().message);
    auto sub = cluster::without_devices(*whole, *removed);
    if (!sub) return report_error("--remove: " + sub.error().message);
    left = std::move(*sub);
  }
  const cluster::Cluster* c = &left.cluster;
  auto algo = search::algo_from_string(a.algo);
  if (!algo)
    return report_error("--algo: expected one of " + search::algo_names() + ", got '" + a.algo +
                        "'");
  search::SearchOptions opts;
  const bool by_price = a.objective == "cost" || a.objective == "throughput-per-dollar";
  if (a.objective == "time" || by_price) {
    opts.objective = search::Objective::time;
  } else if (a.objective == "memory") {
    opts.objective = search::Objective::memory;
  } else {
    return report_error("--objective: expected time|memory|cost|throughput-per-dollar, got '" +
                        a.objective + "'");
  }
  if (!(a.budget_per_hour >= 0 && std::isfinite(a.budget_per_hour)))
    return report_error(
        fmt::format("--budget-per-hour: expected US dollars per hour, a number above 0, got {:g}",
                    a.budget_per_hour));
  if (!(a.max_iteration_time >= 0 && std::isfinite(a.max_iteration_time)))
    return report_error(
        fmt::format("--max-iteration-time: expected seconds, a number above 0, got {:g}",
                    a.max_iteration_time));
  const bool renting = by_price || a.budget_per_hour > 0 || a.max_iteration_time > 0;
  if (renting && a.objective == "memory")
    return report_error(
        "--objective memory: --budget-per-hour and --max-iteration-time go with --objective "
        "time, cost or throughput-per-dollar");
  if (auto bad = fill_search_options(a, opts); !bad.empty()) return report_error(bad);
  if (auto bad = set_runnable(a, *m, opts); !bad.empty()) return report_error(bad);
  if (auto bad =
          set_policy(a, *algo == search::Algo::heterog, search::reads_policy(*algo, *m, *c), opts);
      !bad.empty())
    return report_error(bad);
  if (a.tag_simulations < 0) return report_error("--simulations: expected at least 0");
  opts.tag_simulations = a.tag_simulations;
  opts.seed = a.seed;
  if (!(a.allow_lossy_sync >= 0 && a.allow_lossy_sync <= plan::kMaxLossBound))
    return report_error(fmt::format(
        "--allow-lossy-sync: expected a fraction in [0, {:g}] of the gradient bytes, got {:g}",
        plan::kMaxLossBound, a.allow_lossy_sync));
  opts.dlcp = a.dlcp;
  opts.allow_lossy_sync = a.allow_lossy_sync;
  opts.sim.profile = profile;
  std::optional<search::RentResult> rent;
  Result<search::SearchResult> res = Error{"no search ran"};
  if (renting) {
    search::RentOptions ro;
    ro.objective = by_price ? search::RentObjective::cost : search::RentObjective::time;
    ro.budget_per_hour = UsdPerHour(a.budget_per_hour);
    ro.max_iteration_time = Seconds(a.max_iteration_time);
    auto found = search::find_plan_to_rent(*m, *c, *algo, opts, ro);
    if (!found) return report_error(found.error().message);
    rent = std::move(*found);
    res = rent->best;
  } else {
    res = search::find_plan(*m, *c, *algo, opts);
  }
  if (!res && opts.executable && res.error().message.find("not executable: ") != std::string::npos)
    return report_error(res.error().message +
                        " (--any-form plans it for simulate and export all the same)");
  if (!res) return report_error(res.error().message);
  if (!res->best.fits)
    return report_error(
        m->name + " on " + c->name + ": " + search::shortfall_message(*c, res->best) +
        (*algo == search::Algo::automatic
             ? ""
             : fmt::format(" (of --algo {}'s plans; --algo auto tries every planner)", a.algo)));
  if (!left.original.empty()) {
    res->best.plan = plan::renumber_devices(res->best.plan, left.original);
    res->best.fingerprint = plan::plan_fingerprint(res->best.plan);
    c = &*whole;
    std::string names;
    for (int d : cluster::other_devices(*whole, left.original))
      names += (names.empty() ? "" : ", ") + whole->devices[d].name;
    std::fprintf(stderr, "hetplan: replanned for %s without %s (%zu of %d devices left)\n",
                 whole->name.c_str(), names.c_str(), left.original.size(), whole->num_devices());
  }
  res->best.plan.cluster = whole->reference_or_name();
  sim::SimOptions sopts = opts.sim;
  sopts.record_events = !a.report_file.empty();
  auto r = sim::simulate(*m, *c, res->best.plan, sopts);
  if (!r) return report_error(r.error().message);
  if (!a.out_file.empty() && !write_output_file(a.out_file, plan::to_json_text(res->best.plan)))
    return 2;
  if (!a.report_file.empty()) {
    // The report plots the time/memory frontier too; if none is found it says so.
    if (opts.progress) opts.progress("report: tracing the time/memory frontier");
    auto front = search::find_frontier(*m, left.cluster, opts);
    if (opts.progress) opts.progress("report: writing " + a.report_file);
    const int rc = write_plan_report(a.report_file, *m, *c, *res, *r, front ? &*front : nullptr,
                                     rent ? &*rent : nullptr);
    if (rc) return rc;
  }
  if (a.json) {
    auto j = sim_result_json(*m, *c, res->best.plan, *r);
    j["search_time_s"] = res->search_time_s;
    j["timed_out"] = res->timed_out;
    j["plans_simulated"] = res->plans_simulated;
    j["plan_fingerprint"] = res->best.fingerprint;
    j["baselines"] = baselines_json(*res);
    if (res->plain_transport.ok)
      j["plain_transport_iteration_time_s"] = res->plain_transport.iteration_time_s;
    if (rent) j["rent"] = rent_json(*rent, a);
    j["plan"] = plan::to_json(res->best.plan);
    std::fputs((j.dump(2) + "\n").c_str(), stdout);
  } else {
    print_summary(*m, *c, *res, *r);
    if (rent) print_rent(*c, *rent, a, res->best.plan.global_batch);
  }
  return 0;
}

// --algo, --seed, --out, --calibration and --policy, which plan and replan share.
void add_planner_options(CLI::App* cmd, PlanArgs& a) {
  cmd->add_option(
         "--algo", a.algo,
         "Planner: " + search::algo_names() + " (Frontier Tracking's frontier: hetplan pareto)")
      ->capture_default_str();
  cmd->add_option("--seed", a.seed,
                  "Seed of the op grouping (METIS) and of HeteroG's draws; the stage-level "
                  "planners draw no random "
                  "numbers. The same seed gives the same plan")
      ->capture_default_str();
  cmd->add_option("--out,-o", a.out_file, "Write the plan (JSON) to FILE")->check(writable_output);
  cmd->add_option("--calibration", a.calibration_file, "A measured calibration profile (JSON)");
  cmd->add_option("--policy", a.policy,
                  "TAG's and HeteroG's trained network (hetplan train-policy writes one); "
                  "'none': a uniform prior and no HeteroG. Default: the shipped "
                  "data/policy/tag.pt");
}

}  // namespace

Action add_plan_command(CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  auto* cmd = app.add_subcommand(
      "plan", "Find the fastest plan that fits the cluster, compared with three baselines");
  add_problem_options(cmd, *args);
  add_planner_options(cmd, *args);
  cmd->add_option("--objective", args->objective,
                  "time: the fastest plan that fits; memory: the least peak memory for the "
                  "capacity (the time/memory frontier joins the search), then the fastest; "
                  "cost: the fewest US dollars per iteration, searching subsets of the devices "
                  "(it may leave GPUs unrented); throughput-per-dollar: the most samples per "
                  "dollar, the same plan as cost for a fixed global batch")
      ->capture_default_str();
  cmd->add_option("--budget-per-hour", args->budget_per_hour,
                  "US dollars per hour at most for the devices the plan uses (searches subsets "
                  "of the devices; with --objective time, the fastest plan within it)");
  cmd->add_option("--max-iteration-time", args->max_iteration_time,
                  "Seconds per iteration at most (searches subsets of the devices; with "
                  "--objective cost, the cheapest plan this fast)");
  cmd->add_flag("--dlcp", args->dlcp,
                "Also try DLCP's gradient transport on the best plan (layer priorities, spraying "
                "over equal routes) and keep it when faster; simulated: `hetplan run` sends "
                "gradients as usual");
  cmd->add_option("--allow-lossy-sync", args->allow_lossy_sync,
                  "Also try dropping up to this fraction of the gradient bytes per iteration "
                  "when late (0..0.1; implies --dlcp; `hetplan run` refuses such plans for now)");
  cmd->add_option("--simulations", args->tag_simulations,
                  "TAG's tree-search simulations (0: up to 1000 within a budget of simulated "
                  "work); set, exactly that many, to compare priors at equal budget")
      ->capture_default_str();
  add_search_options(cmd, *args);
  return [args] { return run_plan(*args); };
}

Action add_replan_command(CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  args->replan = true;
  auto* cmd = app.add_subcommand(
      "replan",
      "The best plan for what is left of a cluster after devices fail or leave, for `run "
      "--resume` to continue a run from its checkpoint");
  cmd->add_option("--plan,-p", args->old_plan_file, "The plan the run used (JSON)")->required();
  cmd->add_option("--remove", args->remove,
                  "The devices gone: ids or names of --cluster's devices, separated by commas "
                  "(none: plan for --cluster as it is)");
  auto* model = cmd->add_option("--model,-m", args->model,
                                "Model: preset name, family spec or graph .json (default: the "
                                "plan's `model`)");
  auto* cluster = cmd->add_option("--cluster,-c", args->cluster,
                                  "The cluster the devices are removed from: preset name or YAML "
                                  "file (default: the plan's `cluster`)");
  add_planner_options(cmd, *args);
  add_search_options(cmd, *args);
  return [args, model, cluster] {
    args->model_given = model->count() > 0;
    args->cluster_given = cluster->count() > 0;
    return run_plan(*args);
  };
}

}  // namespace hetplan::cli
