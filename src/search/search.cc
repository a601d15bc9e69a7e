#include "hetplan/search/search.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <exception>
#include <functional>
#include <mutex>
#include <set>
#include <thread>

#include "hetplan/core/quantity_parse.h"
#include "hetplan/search/estimate.h"
#include "hetplan/search/evaluate.h"
#include "hetplan/search/hap.h"
#include "hetplan/search/heterog.h"
#include "hetplan/search/tag.h"

namespace hetplan::search {
namespace {

constexpr std::pair<Algo, const char*> kAlgoNames[] = {{Algo::automatic, "auto"},
                                                       {Algo::dp, "dp"},
                                                       {Algo::megatron, "megatron"},
                                                       {Algo::uneven_dp, "uneven-dp"},
                                                       {Algo::hap, "hap"},
                                                       {Algo::pipeline, "pipeline"},
                                                       {Algo::ft, "ft"},
                                                       {Algo::tag, "tag"},
                                                       {Algo::heterog, "heterog"}};

// The plans would say one precision and be costed in another: "" when they agree.
std::string precision_mismatch(const model::Model& m, const SearchOptions& opts) {
  if (!opts.precision || *opts.precision == m.dtype) return "";
  return fmt::format("--precision {}: the model {} is built in {}; load it in {} to plan for it",
                     model::to_string(*opts.precision), m.name, model::to_string(m.dtype),
                     model::to_string(*opts.precision));
}

}  // namespace

// Op-level plans are lowered op by op on every device of a group: TAG's search runs where that
// stays small enough to simulate hundreds of times (TAG's and HeteroG's clusters had up to 16 GPUs;
// here up to 64 devices and 20000 (op, device) pairs).
bool tag_applies(const model::Model& m, const cluster::Cluster& c) {
  return c.num_devices() <= 64 &&
         static_cast<double>(m.ops.size()) * static_cast<double>(c.num_devices()) <= 20000;
}

namespace {
// `--algo tag`, or auto where TAG applies.
bool runs_tag(Algo algo, const model::Model& m, const cluster::Cluster& c) {
  return algo == Algo::tag || (algo == Algo::automatic && tag_applies(m, c));
}
}  // namespace

bool reads_policy(Algo algo, const model::Model& m, const cluster::Cluster& c) {
  return algo == Algo::heterog || runs_tag(algo, m, c);
}

const char* to_string(Algo a) {
  for (auto [v, n] : kAlgoNames)
    if (v == a) return n;
  return "?";
}

std::optional<Algo> algo_from_string(std::string_view s) {
  for (auto [v, n] : kAlgoNames)
    if (s == n) return v;
  return std::nullopt;
}

std::string algo_names() {
  std::string out;
  for (auto [v, n] : kAlgoNames)
    if (v != Algo::ft) out += (out.empty() ? "" : "|") + std::string(n);
  return out;
}

std::string shortfall_message(const cluster::Cluster& c, const Evaluation& e) {
  if (!e.ok) return e.error;
  const int d = e.shortfall_device;
  const double cap = d >= 0 ? c.type_of(d).memory.value : 0;
  return fmt::format(
      "does not fit: the plan closest to fitting ({}) needs {} more on device {} (peak {} of "
      "capacity {})",
      e.plan.planner, format_bytes(Bytes(e.shortfall_bytes)), d >= 0 ? c.devices[d].name : "?",
      format_bytes(Bytes(cap + e.shortfall_bytes)), format_bytes(Bytes(cap)));
}

Result<SearchResult> find_plan(const model::Model& m, const cluster::Cluster& c, Algo algo,
                               const SearchOptions& opts) {
  if (algo == Algo::ft) return Error{kFtIsPareto};
  if (opts.global_batch < 1) return Error{"--global-batch: expected a positive number of samples"};
  if (auto bad = precision_mismatch(m, opts); !bad.empty()) return Error{bad};
  if (algo == Algo::heterog && !opts.tag_guide)
    return Error{
        "--algo heterog: needs a trained policy (--policy FILE; `hetplan train-policy` writes "
        "one)"};
  if ((algo == Algo::tag || algo == Algo::heterog) && !tag_applies(m, c))
    return Error{fmt::format(
        "--algo {}: the op-level search covers clusters of up to 64 devices and 20000 (op, "
        "device) pairs; {} ({} ops) on {} ({} devices) has {}",
        to_string(algo), m.name, m.ops.size(), c.name, c.num_devices(),
        m.ops.size() * c.devices.size())};
  Deadline deadline(opts.time_limit_s);
  Evaluator evaluator(m, c, opts);
  // Past the limit, with an answer in hand, simulations stop where they are (one on thousands of
  // devices takes a second).
  evaluator.stop_past(deadline);
  Estimator estimator(m, c, opts);
  std::mutex say_mu;  // planners may run side by side (below)
  auto say = [&](const std::string& line) {
    const std::lock_guard<std::mutex> lock(say_mu);
    if (opts.progress) opts.progress(line);
  };
  // Under a time limit each planner gets a slice of what is left: its weight's share of the
  // weights still to run (a baseline 1, a planner 3), so that a slow one early leaves the later
  // ones their part, and one that ends early hands its time on. The slices end with the limit.
  const bool with_tag = runs_tag(algo, m, c);
  const bool runs_stage_planner[3] = {
      algo == Algo::uneven_dp || algo == Algo::automatic || algo == Algo::tag,
      algo == Algo::pipeline || algo == Algo::automatic || algo == Algo::tag,
      algo == Algo::hap || algo == Algo::automatic || algo == Algo::tag};
  const bool with_heterog =
      algo == Algo::heterog || (with_tag && algo == Algo::automatic && opts.tag_guide);
  const bool with_frontier =
      opts.objective == Objective::memory && (algo == Algo::automatic || algo == Algo::pipeline);
  constexpr double kBaselineWeight = 1, kPlannerWeight = 3;
  // Baselines: even and speed-proportional data parallelism, the Megatron-LM grid; those that are
  // the algorithm's answer weigh as planners.
  const std::array<double, 3> baseline_weight = {
      algo == Algo::dp ? kPlannerWeight : kBaselineWeight,
      algo == Algo::dp ? kPlannerWeight : kBaselineWeight,
      algo == Algo::megatron ? kPlannerWeight : kBaselineWeight};
  double weight_left = 0;
  for (double w : baseline_weight) weight_left += w;
  for (bool runs : runs_stage_planner) weight_left += runs ? kPlannerWeight : 0;
  for (bool runs : {with_tag, with_heterog, with_frontier})
    weight_left += runs ? kPlannerWeight : 0;
  auto slice = [&](double weight) {
    const double share = weight_left > 0 ? weight / weight_left : 1.0;
    weight_left -= weight;
    if (opts.time_limit_s <= 0) return Deadline(0);
    // A limit that has passed expires at once (a zero limit never would).
    return Deadline(std::max(1e-9, deadline.remaining_s() * std::min(1.0, share)));
  };
  // Runs one planner in its slice, timing it and reporting what it found. Heterogeneity-aware
  // planners' best plans also try sufficient factor broadcasting where it is cheaper (baselines
  // stay as a user would set them up).
  auto run = [&](const std::function<PlannerOutput(const Context&)>& planner, bool baseline,
                 const Deadline& own, const Estimator& est) {
    const double start = deadline.elapsed_s();
    const Context sub{m, c, opts, evaluator, est, own};
    PlannerOutput o = planner(sub);
    if (!baseline && o.best.ok) {
      const plan::Plan sfb = with_sufficient_factors(sub, o.best.plan);
      if (sfb != o.best.plan) {
        Evaluation e = evaluator.evaluate(sfb);
        // Strictly faster only: a tie keeps the plan a user would set up.
        if (better(e, o.best, opts.objective) && e.iteration_time_s < o.best.iteration_time_s) {
          o.simulated.insert(o.simulated.begin(), e);
          o.best = e;
        }
      }
    }
    // Plans whose simulation the time limit stopped were not simulated.
    const auto stopped = std::erase_if(o.simulated, [](const Evaluation& e) { return e.stopped; });
    o.timed_out = o.timed_out || stopped > 0 || o.best.stopped;
    say(fmt::format("{}: {} candidates estimated, {} simulated, best {}{} ({:.2f} s)", o.name,
                    o.estimated, o.simulated.size(),
                    o.best.ok ? fmt::format("{:.4g} s{}", o.best.iteration_time_s,
                                            o.best.fits ? "" : " (does not fit)")
                              : "none",
                    o.timed_out ? ", time limit" : "", deadline.elapsed_s() - start));
    return o;
  };

  SearchResult res;
  struct Job {
    PlannerOutput (*planner)(const Context&) = nullptr;
    const char* name = "";
    bool baseline = false;
    double weight = 0;
  };
  // The baselines, then the stage-level planners. TAG's op-level search refines what the
  // stage-level planners find: `--algo tag` runs uneven data parallelism, the pipeline planner and
  // HAP beside it and returns the best of the four.
  std::vector<Job> jobs = {{&even_dp, "even-dp", true, baseline_weight[0]},
                           {&proportional_dp, "proportional-dp", true, baseline_weight[1]},
                           {&megatron_grid, "megatron", true, baseline_weight[2]}};
  const std::size_t num_baselines = jobs.size();
  const std::array<Job, 3> stage_planners = {Job{&uneven_dp, "uneven-dp", false, kPlannerWeight},
                                             Job{&pipeline, "pipeline", false, kPlannerWeight},
                                             Job{&hap, "hap", false, kPlannerWeight}};
  for (std::size_t k = 0; k < stage_planners.size(); ++k)
    if (runs_stage_planner[k]) jobs.push_back(stage_planners[k]);
  std::vector<PlannerOutput> outs(jobs.size());
  // They are independent of one another, and run in this order: the algorithm's answers first
  // (weight kPlannerWeight: the stage-level planners, or the baselines `--algo dp` and
  // `--algo megatron` name), so that under a time limit what the user asked for has its time
  // before the baselines do. Without a time limit they run side by side on
  // SearchOptions::threads threads, each thread with an Estimator of its own (it caches and is
  // not thread-safe; its caches only remember, so the estimates are the same) and the Evaluator
  // shared. Each result keeps its place, so the plan does not depend on which ends first. Under a
  // time limit they run one after the other, each in its slice of what is left.
  std::vector<std::size_t> order;
  for (std::size_t i = num_baselines; i < jobs.size(); ++i) order.push_back(i);
  for (std::size_t i = num_baselines; i-- > 0;) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return jobs[a].weight > jobs[b].weight; });
  const int workers =
      opts.time_limit_s > 0 ? 1 : std::min(opts.threads, static_cast<int>(jobs.size()));
  if (workers <= 1) {
    for (std::size_t i : order) {
      // A baseline that is not the algorithm's answer is left out when the time left would not
      // hold one simulation as long as the longest so far.
      if (jobs[i].weight == kBaselineWeight && opts.time_limit_s > 0 &&
          deadline.remaining_s() <= evaluator.longest_simulation_s()) {
        outs[i].name = jobs[i].name;
        outs[i].best.error = "not run: too little of the time limit was left";
        outs[i].timed_out = true;
        slice(jobs[i].weight);
        say(fmt::format("{}: not run, too little of the time limit left", outs[i].name));
        continue;
      }
      outs[i] = run(jobs[i].planner, jobs[i].baseline, slice(jobs[i].weight), estimator);
    }
  } else {
    std::atomic<std::size_t> next{0};
    std::vector<std::exception_ptr> failures(jobs.size());
    const Deadline none(0);
    auto work = [&] {
      const Estimator own(m, c, opts);
      for (std::size_t k = next++; k < order.size(); k = next++) {
        const Job& j = jobs[order[k]];
        try {
          outs[order[k]] = run(j.planner, j.baseline, none, own);
        } catch (...) {
          failures[order[k]] = std::current_exception();
        }
      }
    };
    std::vector<std::thread> pool;
    for (int t = 0; t < workers; ++t) pool.emplace_back(work);
    for (auto& t : pool) t.join();
    for (const auto& f : failures)
      if (f) std::rethrow_exception(f);
  }
  for (std::size_t i = 0; i < jobs.size(); ++i)
    (i < num_baselines ? res.baselines : res.planners).push_back(std::move(outs[i]));
  if (with_tag) {
    // The stage-level planners' best plan that fits is where the op-level search starts.
    // Its budget is simulated work (tasks of the plans it lowers), not seconds, so that the plan
    // does not depend on the machine: 5e6 tasks for --algo tag, which keeps the whole command
    // under 10 s on this project's 2-core machine over the zoo and the presets of up to 64 GPUs
    // (BERT-large's and OPT's plans cost the most per task), 3e6 beside every other planner
    // (auto). --simulations N runs N simulations whatever their work.
    TagOptions to;
    to.max_work = algo == Algo::automatic ? 3e6 : 5e6;
    if (opts.tag_simulations > 0) {
      to.simulations = opts.tag_simulations;
      to.max_work = 0;
    }
    to.guide = opts.tag_guide.get();
    const Evaluation* start = nullptr;
    for (const auto& o : res.planners)
      if (o.best.ok && o.best.fits && (!start || better(o.best, *start, opts.objective)))
        start = &o.best;
    if (start) to.hint = start->plan;
    res.planners.push_back(
        run([&](const Context& x) { return tag(x, to); }, true, slice(kPlannerWeight), estimator));
  }
  // HeteroG's decoder: on its own, and in auto beside TAG when a trained policy is loaded.
  if (with_heterog)
    res.planners.push_back(run([&](const Context& x) { return heterog(x, *opts.tag_guide); }, true,
                               slice(kPlannerWeight), estimator));
  // Each planner above minimises time; for the memory objective the time/memory frontier joins
  // them, with its point of least memory for the capacity.
  if (with_frontier) {
    const double start = deadline.elapsed_s();
    const Deadline own = slice(kPlannerWeight);
    FrontierOutput f = frontier(Context{m, c, opts, evaluator, estimator, own}, 0.03);
    PlannerOutput o;
    o.name = "ft";
    o.estimated = f.estimated;
    o.timed_out = f.timed_out;
    o.simulated = std::move(f.points);
    for (const auto& e : o.simulated)
      if (better(e, o.best, opts.objective)) o.best = e;
    say(fmt::format("ft: {} candidates estimated, {} frontier points, least memory {} ({:.2f} s)",
                    o.estimated, o.simulated.size(),
                    o.best.ok ? fmt::format("{:.3g} of capacity", o.best.memory_ratio) : "none",
                    deadline.elapsed_s() - start));
    res.planners.push_back(std::move(o));
  }

  // The candidates for the answer: the planners run, plus the baselines the algorithm covers.
  std::vector<const PlannerOutput*> pool;
  for (const auto& p : res.planners) pool.push_back(&p);
  for (const auto& b : res.baselines) {
    const bool include = algo == Algo::automatic || (algo == Algo::dp && b.name != "megatron") ||
                         (algo == Algo::megatron && b.name == "megatron");
    if (include) pool.push_back(&b);
  }
  const PlannerOutput* winner = nullptr;
  for (const auto* p : pool) {
    res.timed_out = res.timed_out || p->timed_out;
    if (!p->best.ok) continue;
    if (!winner || better(p->best, winner->best, opts.objective)) winner = p;
  }
  // A planner the deadline cut short before it had a plan to offer may not say so: a search that
  // ends past its deadline was stopped by it.
  res.timed_out = res.timed_out || deadline.expired();
  res.search_time_s = deadline.elapsed_s();
  res.plans_simulated = evaluator.simulated();
  if (!winner) {
    std::string why = "no plan could be built";
    for (const auto* p : pool)
      if (!p->best.error.empty()) why = p->name + ": " + p->best.error;
    return Error{why};
  }
  res.best = winner->best;
  res.planner = winner->name;
  // The refinements below are skipped past the deadline (the search is then timed out).
  // The interleaved schedule over the same stages: a smaller bubble for more transfers, and more
  // activations held in the warm-up (GPT-3 6.7B on a100-v100: 45.9 GiB against 28.0 GiB a device,
  // which no device has), which the simulator weighs. Each also with more recomputation, which
  // gives that memory back for less time than the bubble saves (selective: 19.6 GiB, 4.6% less
  // time).
  if (auto interleaved = interleaved_variants(res.best.plan);
      !interleaved.empty() && !deadline.expired()) {
    std::vector<plan::Plan> variants;
    for (const plan::Plan& v : interleaved)
      for (auto r : {cost::Recompute::none, cost::Recompute::selective, cost::Recompute::full})
        if (r >= v.recompute) {
          variants.push_back(v);
          variants.back().recompute = r;
        }
    const Evaluation plain = res.best;
    for (const Evaluation& e : evaluator.evaluate_all(variants, &deadline))
      if (e.ok && e.fits && better(e, res.best, opts.objective) &&
          e.iteration_time_s < res.best.iteration_time_s)
        res.best = e;
    if (res.best.plan != plain.plan)
      say(fmt::format(
          "interleaved: {} model chunks per stage, recompute {}: {:.4g} s (1F1B {:.4g} s)",
          res.best.plan.stages.size() / plain.plan.stages.size(),
          cost::to_string(res.best.plan.recompute), res.best.iteration_time_s,
          plain.iteration_time_s));
    res.search_time_s = deadline.elapsed_s();
    res.plans_simulated = evaluator.simulated();
  }
  if ((opts.dlcp || opts.allow_lossy_sync > 0) && !deadline.expired()) {
    const auto variants = grad_transport_variants(res.best.plan, c, opts.allow_lossy_sync);
    const Evaluation plain = res.best;
    for (const Evaluation& e : evaluator.evaluate_all(variants, &deadline))
      if (better(e, res.best, opts.objective) && e.iteration_time_s < res.best.iteration_time_s)
        res.best = e;
    if (res.best.plan != plain.plan) {
      res.plain_transport = plain;
      say(
          fmt::format("gradient transport: grad_priority={}, loss_bound={:g}, multipath={}: "
                      "{:.4g} s (plain {:.4g} s)",
                      plan::to_string(res.best.plan.grad_priority), res.best.plan.loss_bound,
                      plan::to_string(res.best.plan.multipath), res.best.iteration_time_s,
                      plain.iteration_time_s));
    }
    res.search_time_s = deadline.elapsed_s();
    res.plans_simulated = evaluator.simulated();
  }
  // A faster plan cannot come from more ZeRO sharding, but one as fast with less memory can (its
  // reduce-scatters and all-gathers hidden behind the computation): the best plan takes the
  // highest ZeRO stage that costs it no time (to the simulator's rounding: a sum of the same
  // durations in another order may differ in its last bits), so that no plan on the time/memory
  // frontier beats it on both.
  if (opts.objective == Objective::time && res.best.fits && !res.best.plan.is_op_level() &&
      res.best.plan.grad_priority == plan::GradPriority::none && !deadline.expired()) {
    std::vector<plan::Plan> sharded;
    for (int z = res.best.plan.zero_stage + 1; z <= 3; ++z) {
      plan::Plan v = res.best.plan;
      v.zero_stage = z;
      sharded.push_back(std::move(v));
    }
    for (const Evaluation& e : evaluator.evaluate_all(sharded, &deadline))
      if (e.ok && e.fits && e.iteration_time_s <= res.best.iteration_time_s * (1 + 1e-12) &&
          e.max_peak_bytes < res.best.max_peak_bytes) {
        say(fmt::format("zero {}: as fast ({:.4g} s), {:.3g} GiB instead of {:.3g}",
                        e.plan.zero_stage, e.iteration_time_s, e.max_peak_bytes / (1 << 30),
                        res.best.max_peak_bytes / (1 << 30)));
        res.best = e;
      }
    res.search_time_s = deadline.elapsed_s();
    res.plans_simulated = evaluator.simulated();
  }
  res.timed_out = res.timed_out || deadline.expired();
  say(fmt::format("best: {} {:.4g} s in {:.2f} s of search", res.planner, res.best.iteration_time_s,
                  res.search_time_s));
  return res;
}

std::vector<plan::Plan> interleaved_variants(const plan::Plan& p) {
  const int P = static_cast<int>(p.stages.size());
  if (p.is_op_level() || p.schedule != plan::Schedule::one_f_one_b || P < 2 ||
      p.num_microbatches % P != 0)
    return {};
  std::set<int> devices;
  for (const auto& st : p.stages)
    for (const auto& r : st.replicas)
      for (int d : r.devices)
        if (!devices.insert(d).second) return {};
  int fewest = p.stages.front().num_layers;
  for (const auto& st : p.stages) fewest = std::min(fewest, st.num_layers);
  std::vector<plan::Plan> out;
  for (int v = 2; v <= std::min(4, fewest); ++v) {
    plan::Plan q = p;
    q.schedule = plan::Schedule::interleaved;
    q.stages.clear();
    int first = p.stages.front().first_layer;
    for (int c = 0; c < v; ++c)
      for (const auto& st : p.stages) {
        plan::Stage chunk = st;
        chunk.first_layer = first;
        chunk.num_layers = st.num_layers / v + (c < st.num_layers % v ? 1 : 0);
        first += chunk.num_layers;
        q.stages.push_back(std::move(chunk));
      }
    out.push_back(std::move(q));
  }
  return out;
}

std::vector<plan::Plan> grad_transport_variants(const plan::Plan& p, const cluster::Cluster& c,
                                                double loss_bound) {
  if (p.is_op_level() || p.zero_stage > 1) return {};
  for (const auto& rule : p.grad_sync)
    if (rule.method == plan::SyncMethod::sufficient_factor) return {};
  bool replicated = false;
  for (const auto& st : p.stages) replicated = replicated || st.replicas.size() > 1;
  if (!replicated) return {};
  std::vector<plan::Plan> out;
  auto add = [&](plan::GradPriority priority, double bound, plan::Multipath multipath) {
    if (priority == plan::GradPriority::none && multipath == plan::Multipath::ecmp) return;
    plan::Plan v = p;
    v.zero_stage = 0;  // chunks carry whole gradients (ZeRO-1's sharded ones are not modelled)
    v.grad_priority = priority;
    v.loss_bound = bound;
    v.multipath = multipath;
    if (v != p) out.push_back(std::move(v));
  };
  std::vector<plan::Multipath> routes{plan::Multipath::ecmp};
  if (c.multipath()) routes.push_back(plan::Multipath::spray);
  for (plan::Multipath m : routes) {
    add(plan::GradPriority::none, 0, m);
    add(plan::GradPriority::layer, 0, m);
    if (loss_bound > 0) add(plan::GradPriority::layer_magnitude, loss_bound, m);
  }
  return out;
}

Result<FrontierResult> find_frontier(const model::Model& m, const cluster::Cluster& c,
                                     const SearchOptions& opts, double epsilon) {
  if (opts.global_batch < 1) return Error{"--global-batch: expected a positive number of samples"};
  if (auto bad = precision_mismatch(m, opts); !bad.empty()) return Error{bad};
  Deadline deadline(opts.time_limit_s);
  Evaluator evaluator(m, c, opts);
  evaluator.stop_past(deadline);
  Estimator estimator(m, c, opts);
  Context ctx{m, c, opts, evaluator, estimator, deadline};
  FrontierOutput f = frontier(ctx, epsilon);
  FrontierResult res;
  res.points = std::move(f.points);
  res.search_time_s = deadline.elapsed_s();
  res.timed_out = f.timed_out;
  res.plans_simulated = evaluator.simulated();
  res.estimated = f.estimated;
  if (opts.progress)
    opts.progress(fmt::format("frontier: {} candidates estimated, {} simulated, {} points",
                              f.estimated, f.simulated, res.points.size()));
  if (res.points.empty())
    return Error{fmt::format(
        "{} on {}: {}", m.name, c.name,
        res.timed_out ? "the time limit passed before a plan that fits was simulated"
        : !f.refused.empty()
            ? "no plan in the pipeline search space both fits the cluster and runs (the first "
              "plan refused as not runnable: " +
                  f.refused + ")"
        : !f.none.empty() ? f.none
                          : "no plan in the pipeline search space fits the cluster")};
  return res;
}

}  // namespace hetplan::search
