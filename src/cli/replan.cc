#include "replan.h"

#include "hetplan/cluster/subcluster.h"
#include "hetplan/plan/renumber.h"
#include "hetplan/search/search.h"

namespace hetplan::cli {

Result<plan::Plan> replan_without(const model::Model& m, const cluster::Cluster& c,
                                  const std::vector<int>& removed, const plan::Plan& before,
                                  SearchArgs a) {
  auto left = cluster::without_devices(c, removed);
  if (!left) return left.error();
  a.global_batch = before.global_batch;
  a.resumes = &before;
  // The run goes on in the precision it trained in (and `m` was built in it).
  if (before.precision) a.precision = plan::precision_name(*before.precision);
  a.adam = plan::adam_name(before.adam);
  a.loss = plan::loss_name(before.loss);
  a.metrics = before.metrics;
  search::SearchOptions opts;
  if (auto bad = fill_search_options(a, opts); !bad.empty()) return Error{bad};
  if (auto bad = set_runnable(a, m, opts); !bad.empty()) return Error{bad};
  const auto algo = search::Algo::automatic;
  if (auto bad = set_policy(a, false, search::reads_policy(algo, m, left->cluster), opts);
      !bad.empty())
    return Error{bad};
  auto res = search::find_plan(m, left->cluster, algo, opts);
  if (!res) return res.error();
  if (!res->best.fits)
    return Error{m.name + " on " + c.name + " without the lost devices: " +
                 search::shortfall_message(left->cluster, res->best)};
  return plan::renumber_devices(res->best.plan, left->original);
}

}  // namespace hetplan::cli
