// Sufficient factor broadcasting where it is cheaper than all-reducing a weight gradient.
#include <fmt/format.h>

#include "hetplan/search/planners.h"
#include "hetplan/sim/grad_sync.h"

namespace hetplan::search {

plan::Plan with_sufficient_factors(const Context& ctx, const plan::Plan& p) {
  // Each op's synchronisation is a separate collective on the same links, so the choice is made
  // op by op: an op switches when its factors gather and rebuild faster than its gradient
  // all-reduces, standalone. The caller simulates the result before keeping it.
  std::vector<plan::GradSync> rules;
  for (const auto& f : sim::sufficient_factor_choices(ctx.model, ctx.cluster, p, ctx.options.sim))
    if (f.sufficient_factor_s < f.all_reduce_s)
      rules.push_back(plan::GradSync{ctx.model.ops[f.op].name, plan::SyncMethod::sufficient_factor,
                                     cost::Algorithm::automatic, 0});
  if (rules.empty()) return p;
  plan::Plan out = p;
  // The plan's own rules come after: first match wins, and these name single ops.
  out.grad_sync.insert(out.grad_sync.begin(), rules.begin(), rules.end());
  out.planner = p.planner + "+sfb";
  return out;
}

}  // namespace hetplan::search
