// HeteroG's direct decoding (heterog.h).
#include "hetplan/search/heterog.h"

#include <fmt/format.h>

#include <random>

namespace hetplan::search {

std::vector<int> decode_sequence(TagProblem& problem, TagGuide& guide, std::uint64_t* rng) {
  std::vector<int> seq;
  while (static_cast<int>(seq.size()) < problem.depth()) {
    const TagState state = tag_state(problem, seq);
    std::vector<double> w = guide.decode(problem.graph(), state);
    for (std::size_t a = 0; a < w.size(); ++a)
      if (a >= state.mask.size() || state.mask[a] == 0 || !(w[a] > 0)) w[a] = 0;
    int choice = 0;
    if (rng) {
      std::mt19937_64 gen(*rng);
      *rng = gen();
      double total = 0;
      for (double x : w) total += x;
      if (total > 0) {
        std::discrete_distribution<int> pick(w.begin(), w.end());
        choice = pick(gen);
      }
    } else {
      for (std::size_t a = 1; a < w.size(); ++a)
        if (w[a] > w[static_cast<std::size_t>(choice)]) choice = static_cast<int>(a);
    }
    seq.push_back(choice);
  }
  return seq;
}

int evaluate_decoded(TagProblem& problem, TagGuide& guide, int count, std::uint64_t seed,
                     const std::function<bool()>& stop) {
  std::uint64_t rng = seed * 0x9E3779B97F4A7C15ULL + 7;
  int decoded = 0;
  for (; decoded < count && !stop(); ++decoded)
    problem.evaluate(decode_sequence(problem, guide, decoded == 0 ? nullptr : &rng));
  return decoded;
}

PlannerOutput heterog(const Context& ctx, TagGuide& guide, const HeterogOptions& options) {
  PlannerOutput out;
  out.name = "heterog";
  if (ctx.options.global_batch < 1 || ctx.model.ops.empty()) return out;
  auto grouping = tag_grouping(ctx, options.groups);
  if (!grouping) {
    out.best.error = grouping.error().message;
    return out;
  }
  TagProblem problem(ctx, std::move(*grouping));
  if (!problem.baseline().ok) {
    out.best = problem.baseline();
    return out;
  }
  const int decoded = evaluate_decoded(problem, guide, options.samples + 1, ctx.options.seed,
                                       [&] { return ctx.deadline.expired(); });
  out.estimated = problem.evaluations();
  out.best = problem.best();
  out.best.plan.planner = "heterog";
  out.simulated = problem.top(8);
  for (auto& e : out.simulated) e.plan.planner = "heterog";
  out.timed_out = ctx.deadline.expired();
  if (ctx.options.progress)
    ctx.options.progress(fmt::format(
        "heterog: {} groups, {} sequences decoded by {}, data parallel {}, best {}",
        problem.depth() - 1, decoded, guide.describe(),
        problem.baseline().ok ? fmt::format("{:.4g} s", problem.baseline().iteration_time_s) : "-",
        out.best.ok ? fmt::format("{:.4g} s", out.best.iteration_time_s) : "none"));
  return out;
}

}  // namespace hetplan::search
