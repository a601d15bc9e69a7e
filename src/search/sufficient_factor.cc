// Every weight gradient's way of synchronisation (all-reduce, parameter server, sufficient factor
// broadcasting), chosen for all of a plan's ops at once by the MILP of search/sync_milp.h.
#include <fmt/format.h>

#include <algorithm>

#include "hetplan/search/planners.h"
#include "hetplan/search/sync_milp.h"

namespace hetplan::search {

plan::Plan with_sufficient_factors(const Context& ctx, const plan::Plan& p) {
  // The ops' synchronisations share the links and the rebuilds share the replicas' compute, so
  // the choice is made for all of them at once; the caller simulates the result once against p
  // before keeping it.
  // Within the search's time limit: none left, no choice; some left, the MILP's best by then.
  if (ctx.deadline.expired()) return p;
  sim::SimOptions priced = ctx.options.sim;
  // Pricing the ways takes seconds on thousands of devices: it stops with the time limit too.
  if (ctx.options.time_limit_s > 0) priced.stop = [&] { return ctx.deadline.expired(); };
  SyncRequest req = sync_request(ctx.model, ctx.cluster, p, priced);
  if (req.items.empty()) return p;
  if (ctx.options.time_limit_s > 0) req.time_limit_s = std::max(1e-3, ctx.deadline.remaining_s());
  const SyncChoice choice = solve_sync_milp(req);
  // A MILP the time limit cut short is the limit's doing, not a fault to warn of.
  if (choice.status == SyncStatus::fallback && ctx.options.progress && !ctx.deadline.expired())
    ctx.options.progress(fmt::format("warning: {}; gradients stay on all-reduce", choice.warning));
  std::vector<plan::GradSync> rules;
  bool factors = false, servers = false;
  for (std::size_t i = 0; i < req.items.size(); ++i) {
    const int w = choice.way[i];
    if (w == kAllReduce) continue;
    factors |= w == kSufficientFactor;
    servers |= w == kParameterServer;
    rules.push_back(plan::GradSync{
        req.items[i].name, kSyncWays[w],
        w == kParameterServer ? cost::Algorithm::parameter_server : cost::Algorithm::automatic, 0});
  }
  if (rules.empty()) return p;
  plan::Plan out = p;
  // The plan's own rules come after: first match wins, and these name single ops (which no rule
  // of p names: sync_request leaves those out).
  out.grad_sync.insert(out.grad_sync.begin(), rules.begin(), rules.end());
  out.planner = p.planner + (factors ? "+sfb" : "") + (servers ? "+ps" : "");
  return out;
}

}  // namespace hetplan::search
