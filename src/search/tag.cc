// TAG's op-level search (tag.h).
#include "hetplan/search/tag.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>

#include "hetplan/model/training.h"
#include "hetplan/plan/op_groups.h"
#include "hetplan/plan/plan.h"
#include "hetplan/search/heterog.h"
#include "hetplan/sim/grad_sync.h"

namespace hetplan::search {
namespace {

// The device sets a group may run on: every device; the devices of each type and of each node
// (when there are several); each node's fastest device alone (the lowest index among equals).
// Values are the log of the speed-up over data parallelism (TAG squashes large speed-ups), so
// that PUCT's exploration term keeps its weight beside them; between e^-1.5 and e^3; a plan that
// does not fit is worth less than any that does.
constexpr double kInfeasible = -2.0;

// Micro-batch counts at most (the lowering's tasks grow with them).
constexpr long long kMostMicrobatches = 32;

// The next count after `from` (a power of two times it) that divides `batch`, up to `most`; 0 if
// none.
long long next_count(long long from, long long batch, long long most) {
  for (long long x = 2 * from; x <= most; x *= 2)
    if (batch % x == 0) return x;
  return 0;
}

// Whether every op group of a and b runs on the same devices (plans of one decision at two
// micro-batch counts: with fewer samples per micro-batch a slow device may drop out).
bool same_devices(const plan::Plan& a, const plan::Plan& b) {
  if (a.op_groups.size() != b.op_groups.size()) return false;
  for (std::size_t g = 0; g < a.op_groups.size(); ++g)
    if (a.op_groups[g].devices != b.op_groups[g].devices) return false;
  return true;
}

std::vector<std::vector<int>> device_sets(const cluster::Cluster& c, model::DType dtype) {
  std::vector<std::vector<int>> sets;
  auto add = [&](std::vector<int> s) {
    std::sort(s.begin(), s.end());
    if (!s.empty() && std::find(sets.begin(), sets.end(), s) == sets.end())
      sets.push_back(std::move(s));
  };
  std::vector<int> all(static_cast<std::size_t>(c.num_devices()));
  std::iota(all.begin(), all.end(), 0);
  add(all);
  std::map<std::string, std::vector<int>> by_type;
  for (int d = 0; d < c.num_devices(); ++d) by_type[c.type_of(d).name].push_back(d);
  if (by_type.size() > 1)
    for (auto& [name, devs] : by_type) add(devs);
  if (c.nodes.size() > 1)
    for (const auto& n : c.nodes) add(n.devices);
  for (const auto& n : c.nodes) {
    int best = -1;
    for (int d : n.devices)
      if (best < 0 || c.type_of(d).peak(dtype).value > c.type_of(best).peak(dtype).value) best = d;
    if (best >= 0) add({best});
  }
  return sets;
}

}  // namespace

TagProblem::TagProblem(const Context& ctx, OpGrouping grouping, const plan::Plan* hint,
                       TagGuide* guide, bool tensor_splits)
    : ctx_(ctx), grouping_(std::move(grouping)), guide_(guide) {
  const model::Model& m = ctx.model;
  const cluster::Cluster& c = ctx.cluster;
  const cost::ComputeCostModel compute(ctx.options.sim.compute, ctx.options.sim.profile);
  const std::size_t G = grouping_.groups.size();
  group_time_.assign(G, std::vector<double>(c.device_types.size(), 0.0));
  for (std::size_t t = 0; t < c.device_types.size(); ++t) {
    const auto w = op_compute_weights(m, c.device_types[t], compute);
    for (std::size_t op = 0; op < w.size(); ++op)
      group_time_[grouping_.group_of_op[op]][t] += w[op];
  }
  // Seconds per sample of the whole model on each type at an even share of the batch (GEMMs on
  // one sample would understate the fast devices).
  const model::TrainingGraph tg = model::derive_training_graph(m);
  const double per_device =
      std::max(1.0, static_cast<double>(ctx.options.global_batch) / c.num_devices());
  model_time_.assign(c.device_types.size(), 0.0);
  for (std::size_t t = 0; t < c.device_types.size(); ++t) {
    for (const auto* pass : {&tg.forward, &tg.backward})
      for (const auto& op : *pass)
        model_time_[t] += compute.op_time(c.device_types[t], op, per_device, 1.0, m.dtype).value;
    model_time_[t] /= per_device;
  }
  // Decisions in order of the groups' compute on the cluster's first device (TAG sorts its
  // groups by compute time), ties by group index.
  order_.resize(G);
  std::iota(order_.begin(), order_.end(), 0);
  const int t0 = c.devices.empty() ? 0 : c.devices[0].type;
  std::stable_sort(order_.begin(), order_.end(),
                   [&](int a, int b) { return group_time_[a][t0] > group_time_[b][t0]; });
  has_factor_op_.assign(G, false);
  for (std::size_t op = 0; op < m.ops.size(); ++op)
    if (sim::sufficient_factor_applies(m.ops[op], plan::SplitKind::tensor))
      has_factor_op_[grouping_.group_of_op[op]] = true;
  has_attention_core_ = std::any_of(m.ops.begin(), m.ops.end(),
                                    [](const model::Op& op) { return op.attention_core; });
  for (auto& s : device_sets(c, m.dtype)) {
    actions_.push_back(Action{s, plan::SyncMethod::all_reduce});
    if (s.size() == 1) continue;
    actions_.push_back(Action{s, plan::SyncMethod::parameter_server});
    actions_.push_back(Action{s, plan::SyncMethod::sufficient_factor});
    // Tensor splits exchange activations at every layer: offered within one node only, as
    // Megatron-LM keeps tensor parallelism on the node's fast links.
    bool one_node = true;
    for (int d : s) one_node = one_node && c.devices[d].node == c.devices[s.front()].node;
    if (tensor_splits && one_node)
      actions_.push_back(Action{s, plan::SyncMethod::all_reduce, true});
  }
  // Micro-batch counts: from the fewest (powers of two, while every device keeps a sample) with
  // which the data-parallel plan fits, up to 8 times as many, for pipelines of placed groups.
  // Counts divide the batch, so that every device's share is whole samples per micro-batch; at
  // most kMostMicrobatches (the lowering's tasks grow with them).
  const long long B = ctx.options.global_batch;
  const long long most = std::min(kMostMicrobatches, std::max<long long>(1, B / c.num_devices()));
  auto next = [&](long long from) { return next_count(from, B, most); };
  microbatches_ = {1};
  while (true) {
    baseline_ = simulate(plan_of({}));
    const long long more = next(microbatches_[0]);
    if ((baseline_.ok && baseline_.fits) || more == 0 || ctx.deadline.expired()) break;
    microbatches_[0] = static_cast<int>(more);
  }
  // With the most micro-batches still too big: the memory savings (fitted).
  if (baseline_.ok && !baseline_.fits && !ctx.deadline.expired()) baseline_ = fitted({});
  // The data-parallel plan is one of the space's plans (every group replicated on every device):
  // where it is the best evaluated (the decoded plans slower, or refused as not executable), it
  // is the answer.
  keep(baseline_);
  for (int k = 1; k <= 3; ++k) {
    const long long more = next(microbatches_.back());
    if (more == 0) break;
    microbatches_.push_back(static_cast<int>(more));
  }
  hint_action_.assign(G, -1);
  if (hint && !hint->is_op_level() && !hint->stages.empty()) {
    auto at = std::find(microbatches_.begin(), microbatches_.end(), hint->num_microbatches);
    if (at == microbatches_.end() && hint->num_microbatches <= most &&
        B % hint->num_microbatches == 0) {
      microbatches_.push_back(hint->num_microbatches);
      at = microbatches_.end() - 1;
    }
    if (at != microbatches_.end()) {
      hint_microbatches_ = static_cast<int>(at - microbatches_.begin());
    } else {  // the most micro-batches offered, up to the hint's
      hint_microbatches_ = 0;
      for (std::size_t i = 0; i < microbatches_.size(); ++i)
        if (microbatches_[i] <= hint->num_microbatches &&
            microbatches_[i] > microbatches_[hint_microbatches_])
          hint_microbatches_ = static_cast<int>(i);
    }
    // Each stage's devices as a decision (all-reduce; a tensor split for a stage of one
    // tensor-parallel replica), and each group's stage: the one holding most of its ops.
    std::vector<int> stage_action;
    for (const auto& st : hint->stages) {
      std::vector<int> devs;
      for (const auto& r : st.replicas) devs.insert(devs.end(), r.devices.begin(), r.devices.end());
      std::sort(devs.begin(), devs.end());
      const bool split = tensor_splits && st.replicas.size() == 1 && devs.size() > 1;
      int a = -1;
      for (std::size_t i = 0; i < actions_.size() && a < 0; ++i)
        if (actions_[i].devices == devs && actions_[i].sync == plan::SyncMethod::all_reduce &&
            actions_[i].split == split)
          a = static_cast<int>(i);
      if (a < 0) {
        a = static_cast<int>(actions_.size());
        actions_.push_back(Action{devs, plan::SyncMethod::all_reduce, split});
      }
      stage_action.push_back(a);
    }
    for (std::size_t g = 0; g < G; ++g) {
      std::map<int, int> count;
      for (int op : grouping_.groups[g]) ++count[plan::stage_of_layer(*hint, m.layer_of(op))];
      int best = -1, most_ops = 0;
      for (auto [stage, n] : count)
        if (stage >= 0 && n > most_ops) {
          best = stage;
          most_ops = n;
        }
      if (best >= 0) hint_action_[g] = stage_action[best];
    }
  }
}

int TagProblem::num_actions(std::span<const int> prefix) {
  return static_cast<int>(prefix.empty() ? microbatches_.size() : actions_.size());
}

// Half the prior on a hinted choice, the rest spread evenly over the others.
void favour(std::vector<double>& p, int hinted) {
  if (hinted < 0) return;
  double others = 0;
  for (std::size_t a = 0; a < p.size(); ++a)
    if (static_cast<int>(a) != hinted) others += p[a];
  p[hinted] = others > 0 ? others : 1.0;
}

std::vector<int> TagProblem::hint_decisions() const {
  if (hint_microbatches_ < 0) return {};
  std::vector<int> seq{hint_microbatches_};
  for (int g : order_) seq.push_back(std::max(0, hint_action_[g]));
  return seq;
}

const TagGraph& TagProblem::graph() const {
  if (!graph_) graph_ = tag_graph(*this);
  return *graph_;
}

std::vector<double> TagProblem::prior(std::span<const int> prefix) {
  if (guide_) {
    std::vector<double> p = guide_->prior(graph(), tag_state(*this, prefix));
    favour(p, prefix.empty() ? hint_microbatches_ : hint_action_[order_[prefix.size() - 1]]);
    return p;
  }
  if (prefix.empty()) {
    std::vector<double> p(microbatches_.size(), 1.0);
    favour(p, hint_microbatches_);
    return p;
  }
  const int g = order_[prefix.size() - 1];
  std::vector<double> p(actions_.size(), 1.0);
  for (std::size_t a = 0; a < actions_.size(); ++a)
    if (actions_[a].sync == plan::SyncMethod::sufficient_factor && !has_factor_op_[g]) p[a] = 0;
  favour(p, hint_action_[g]);
  return p;
}

Evaluation TagProblem::simulate(const plan::Plan& p) {
  Evaluation e = ctx_.evaluator.evaluate(p);
  // Work for plans simulated anew (the evaluator's cache answers the same plan again: sync choices
  // of a group without weights, sufficient factors where none apply).
  if (!e.stopped && simulated_.insert(e.fingerprint).second)
    for (const auto& og : p.op_groups)
      work_ += 2.0 * static_cast<double>(og.ops.size() * og.devices.size()) * p.num_microbatches;
  return e;
}

Evaluation TagProblem::fitted(std::span<const int> prefix) {
  const plan::Plan p = plan_of(prefix);
  Evaluation e = simulate(p);
  if (!e.ok || e.fits) return e;
  Evaluation closest = e;
  auto closer = [&](Evaluation& f) {
    if (f.ok && f.memory_ratio < closest.memory_ratio) closest = std::move(f);
  };
  bool stopped = false;  // the time limit: what is left would stop too
  // More micro-batches, the decisions kept: the fewest (doubling, dividing the batch) with which
  // the plan fits, while every group keeps its devices.
  std::optional<Evaluation> more;
  std::optional<plan::Plan> most;  // the most micro-batches tried
  const long long B = ctx_.options.global_batch;
  for (long long M = next_count(p.num_microbatches, B, kMostMicrobatches); M > 0 && !more;
       M = next_count(M, B, kMostMicrobatches)) {
    plan::Plan q = plan_of(prefix, static_cast<int>(M));
    if (!same_devices(p, q)) break;
    Evaluation f = simulate(q);
    if (f.stopped) return closest;
    most = std::move(q);
    if (f.ok && f.fits)
      more = std::move(f);
    else
      closer(f);
  }
  // The memory savings an op-level plan has (the op-level runtime executes both), in the order of
  // what they add to a step: selective recomputation (a layer's attention scores again), ZeRO-1
  // (an all-gather of the updated slices), both, full recomputation (every block's forward pass
  // again), with ZeRO-1: the first that fits. Savings that cannot change the plan's memory are not
  // simulated: selective recomputation without attention cores, ZeRO-1 without a group it shards.
  const bool zero_shards =
      std::any_of(p.op_groups.begin(), p.op_groups.end(),
                  [](const plan::OpGroup& og) { return plan::zero_shards(og); });
  auto first_saving = [&](const plan::Plan& base) -> std::optional<Evaluation> {
    static constexpr std::pair<cost::Recompute, int> kSavings[] = {{cost::Recompute::selective, 0},
                                                                   {cost::Recompute::none, 1},
                                                                   {cost::Recompute::selective, 1},
                                                                   {cost::Recompute::full, 0},
                                                                   {cost::Recompute::full, 1}};
    for (auto [recompute, zero] : kSavings) {
      if ((recompute == cost::Recompute::selective && !has_attention_core_) ||
          (zero == 1 && !zero_shards))
        continue;
      plan::Plan q = base;
      q.recompute = recompute;
      q.zero_stage = zero;
      Evaluation f = simulate(q);
      if (f.stopped) {
        stopped = true;
        return std::nullopt;
      }
      if (f.ok && f.fits) return f;
      closer(f);
    }
    return std::nullopt;
  };
  // At the decided count; the faster of that and more micro-batches where both fit.
  const std::optional<Evaluation> saved = first_saving(p);
  if (more && (!saved || more->iteration_time_s <= saved->iteration_time_s)) return *more;
  if (saved) return *saved;
  // Neither alone: the savings at the most micro-batches tried.
  if (most && !stopped)
    if (auto both = first_saving(*most)) return *both;
  return closest;
}

double TagProblem::evaluate(std::span<const int> prefix) {
  const Evaluation e = fitted(prefix);
  last_ = e;
  ++evaluations_;
  keep(e);
  if (!e.ok || !e.fits) return kInfeasible;
  const double base = baseline_.ok && baseline_.iteration_time_s > 0 ? baseline_.iteration_time_s
                                                                     : e.iteration_time_s;
  return std::clamp(std::log(base / e.iteration_time_s), kInfeasible + 0.5, 3.0);
}

plan::Plan TagProblem::plan_of(std::span<const int> prefix, int microbatches) const {
  const model::Model& m = ctx_.model;
  plan::Plan p;
  p.model = m.name;
  p.cluster = ctx_.cluster.reference_or_name();
  p.planner = "tag";
  p.global_batch = ctx_.options.global_batch;
  p.precision = ctx_.options.precision;
  p.adam = ctx_.options.adam;
  p.loss = ctx_.options.loss;
  p.metrics = ctx_.options.metrics;
  const int M = microbatches > 0
                    ? microbatches
                    : microbatches_[prefix.empty() ? 0 : static_cast<std::size_t>(prefix[0])];
  p.num_microbatches = M;
  p.execution_order = plan::ExecutionOrder::heft;
  std::vector<int> choice(order_.size(), 0);
  for (std::size_t i = 1; i < prefix.size(); ++i) choice[order_[i - 1]] = prefix[i];
  for (std::size_t g = 0; g < grouping_.groups.size(); ++g) {
    plan::OpGroup og;
    for (int op : grouping_.groups[g]) og.ops.push_back(m.ops[op].name);
    const Action& a = actions_[choice[g]];
    if (a.split) {
      split_tensors(a.devices, og);
      p.op_groups.push_back(std::move(og));
      continue;
    }
    place_samples(a.devices, M, og);
    if (og.devices.size() > 1) {
      og.sync = a.sync;
      if (a.sync == plan::SyncMethod::sufficient_factor && !has_factor_op_[g])
        og.sync = plan::SyncMethod::all_reduce;
      if (a.sync == plan::SyncMethod::parameter_server) og.servers = og.devices;
    }
    p.op_groups.push_back(std::move(og));
  }
  return p;
}

double TagProblem::device_speed(int d) const {
  const cluster::Cluster& c = ctx_.cluster;
  const double t = model_time_[c.devices[d].type];
  return t > 0 ? c.nodes[c.devices[d].node].cpu_share / t : 1.0;
}

void TagProblem::split_tensors(const std::vector<int>& devices, plan::OpGroup& og) const {
  og.mode = plan::GroupMode::split;
  og.devices = devices;
  double total = 0;
  for (int d : devices) total += device_speed(d);
  bool even = true;
  for (int d : devices) {
    og.shares.push_back(device_speed(d) / total);
    even = even && device_speed(d) == device_speed(devices.front());
  }
  if (even) og.shares.clear();
}

void TagProblem::place_samples(const std::vector<int>& devices, int microbatches,
                               plan::OpGroup& og) const {
  // Whole samples per micro-batch.
  const long long B = ctx_.options.global_batch;
  const long long count = B / microbatches;  // the counts divide the batch
  const double samples = static_cast<double>(count);
  std::vector<double> speed;
  double total = 0;
  // Speed on the whole model, not on this group alone: groups on the same devices then split the
  // samples alike, and nothing moves between them.
  for (int d : devices) {
    speed.push_back(device_speed(d));
    total += speed.back();
  }
  // In proportion to speed, by largest remainder (ties: the lower index).
  std::vector<long long> whole(devices.size());
  std::vector<std::pair<double, std::size_t>> rest;
  long long given = 0;
  for (std::size_t j = 0; j < devices.size(); ++j) {
    const double exact = samples * speed[j] / total;
    whole[j] = static_cast<long long>(std::floor(exact));
    given += whole[j];
    rest.emplace_back(-(exact - static_cast<double>(whole[j])), j);
  }
  std::sort(rest.begin(), rest.end());
  for (std::size_t i = 0; given < count && i < rest.size(); ++i, ++given) ++whole[rest[i].second];
  for (std::size_t j = 0; j < devices.size(); ++j)
    if (whole[j] > 0) {
      og.devices.push_back(devices[j]);
      og.shares.push_back(static_cast<double>(whole[j]) / samples);
    }
  if (og.devices.size() == 1) {
    og.mode = plan::GroupMode::place;
    og.shares.clear();
    return;
  }
  bool even = true;
  for (double s : og.shares) even = even && s == og.shares.front();
  if (even) og.shares.clear();
}

void TagProblem::keep(const Evaluation& e) {
  // (The first evaluation replaces the empty start even when it failed: its error then says why
  // no plan came out.)
  const bool first = !best_.ok && best_.error.empty();
  if (first || better(e, best_, ctx_.options.objective)) best_ = e;
  constexpr std::size_t kTop = 8;
  for (const auto& t : top_)
    if (t.fingerprint == e.fingerprint) return;
  auto at = std::find_if(top_.begin(), top_.end(),
                         [&](const Evaluation& t) { return better(e, t, ctx_.options.objective); });
  if (at == top_.end() && top_.size() >= kTop) return;
  top_.insert(at, e);
  if (top_.size() > kTop) top_.pop_back();
}

std::vector<Evaluation> TagProblem::top(std::size_t n) const {
  return {top_.begin(), top_.begin() + static_cast<std::ptrdiff_t>(std::min(n, top_.size()))};
}

MctsOptions mcts_options(const TagOptions& options, std::uint64_t seed) {
  MctsOptions mo;
  mo.simulations = options.simulations;
  mo.c_puct = options.c_puct;
  mo.max_weight = 0.5;
  mo.fpu_reduction = -options.first_play_bonus;
  mo.fpu_parent_q = true;
  mo.skip_exhausted = true;
  mo.seed = seed;
  return mo;
}

Result<OpGrouping> tag_grouping(const Context& ctx, int groups) {
  const model::Model& m = ctx.model;
  const cluster::Cluster& c = ctx.cluster;
  // The fastest device type weighs the ops for grouping.
  int fastest = 0;
  for (std::size_t t = 0; t < c.device_types.size(); ++t)
    if (c.device_types[t].peak(m.dtype).value > c.device_types[fastest].peak(m.dtype).value)
      fastest = static_cast<int>(t);
  const cost::ComputeCostModel compute(ctx.options.sim.compute, ctx.options.sim.profile);
  const int k = groups > 0 ? groups : default_group_count(m);
  return group_ops(m, op_compute_weights(m, c.device_types[fastest], compute), k, ctx.options.seed);
}

PlannerOutput tag(const Context& ctx, const TagOptions& options) {
  PlannerOutput out;
  out.name = "tag";
  if (ctx.options.global_batch < 1 || ctx.model.ops.empty()) return out;
  auto grouping = tag_grouping(ctx, options.groups);
  if (!grouping) {
    out.best.error = grouping.error().message;
    return out;
  }
  TagProblem problem(ctx, std::move(*grouping), options.hint ? &*options.hint : nullptr,
                     options.guide, options.tensor_splits);
  if (!problem.baseline().ok) {  // e.g. op-level plans are not executable and must be
    out.best = problem.baseline();
    return out;
  }
  const Deadline budget(options.budget_s);
  // The hint's own op-level form, evaluated first.
  std::string hinted = "-";
  if (auto seq = problem.hint_decisions(); !seq.empty()) {
    problem.evaluate(seq);
    const Evaluation& e = problem.last();
    hinted = e.ok ? fmt::format("{:.4g} s{}", e.iteration_time_s, e.fits ? "" : " (does not fit)")
                  : e.error;
  }
  // The learned decoder's plans next.
  auto spent = [&] { return options.max_work > 0 && problem.work() >= options.max_work; };
  auto stop = [&] { return ctx.deadline.expired() || budget.expired() || spent(); };
  const int decoded =
      options.guide
          ? evaluate_decoded(problem, *options.guide,
                             std::min(options.decoded_starts + 1, std::max(0, options.simulations)),
                             ctx.options.seed, stop)
          : 0;
  MctsOptions mo = mcts_options(options, ctx.options.seed);
  mo.simulations = std::max(0, options.simulations - decoded);  // the decoded plans count
  mo.should_stop = stop;
  const MctsResult r = mcts(problem, mo);
  out.timed_out = ctx.deadline.expired();  // the budget is the search's size, not a time limit
  out.estimated = problem.evaluations();
  out.best = problem.best();
  out.simulated = problem.top(8);
  if (ctx.options.progress)
    ctx.options.progress(fmt::format(
        "tag: {} groups, {} actions each, prior {}, {} decoded starts, {} simulations, {} plans "
        "evaluated, data parallel {}, the stage-level start {}, best {}",
        problem.depth() - 1, problem.actions().size(),
        options.guide ? options.guide->describe() : "uniform", decoded, r.simulations,
        problem.evaluations(),
        problem.baseline().ok ? fmt::format("{:.4g} s", problem.baseline().iteration_time_s) : "-",
        hinted, out.best.ok ? fmt::format("{:.4g} s", out.best.iteration_time_s) : "none"));
  return out;
}

}  // namespace hetplan::search
