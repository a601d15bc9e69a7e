#include "hetplan/search/uneven_shares.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <utility>

#include "hetplan/search/lp.h"

namespace hetplan::search {

Result<ShareSolution> solve_shares(const ShareProblem& prob) {
  const std::size_t n = prob.per_sample_time.size();
  std::int64_t room = 0;
  for (auto m : prob.max_samples) room += std::max<std::int64_t>(0, m);
  if (room < prob.total)
    return Error{fmt::format("the replicas' memory holds {} samples, {} needed", room, prob.total)};
  // Replicas with the same time and bound are interchangeable: by symmetry an optimum spreads a
  // class's samples evenly over its members, so the LP has one variable per class (bounded by the
  // class's room) and the replicas' fractional values are the class's share each.
  std::map<std::pair<double, std::int64_t>, std::vector<std::size_t>> classes;
  for (std::size_t r = 0; r < n; ++r)
    classes[{prob.per_sample_time[r], std::max<std::int64_t>(0, prob.max_samples[r])}].push_back(r);
  LpRequest req;
  const int T = req.add_variable({"T", 0, kInf, 1.0, false});
  LpRow sum{"sum of samples", {}, static_cast<double>(prob.total), static_cast<double>(prob.total)};
  std::vector<std::pair<int, const std::vector<std::size_t>*>> vars;
  for (const auto& [key, members] : classes) {
    const double count = static_cast<double>(members.size());
    const int x = req.add_variable({fmt::format("x{}", members.front()), 0,
                                    static_cast<double>(key.second) * count, 0.0, false});
    req.add_row({fmt::format("time of replica {}", members.front()),
                 {{x, key.first / count}, {T, -1.0}},
                 -kInf,
                 0.0});
    sum.terms.push_back({x, 1.0});
    vars.emplace_back(x, &members);
  }
  req.add_row(std::move(sum));
  auto lp = solve_checked(req);
  if (!lp) return lp.error();
  std::vector<double> values(n);
  for (const auto& [x, members] : vars)
    for (std::size_t r : *members) values[r] = lp->values[x] / static_cast<double>(members->size());

  ShareSolution sol;
  sol.lp_time = lp->objective;
  sol.samples.resize(n);
  std::int64_t given = 0;
  for (std::size_t r = 0; r < n; ++r) {
    // Floor, with a small tolerance so 2.9999999 counts as 3.
    sol.samples[r] = static_cast<std::int64_t>(std::floor(values[r] + 1e-7));
    sol.samples[r] = std::min(sol.samples[r], prob.max_samples[r]);
    given += sol.samples[r];
  }
  while (given < prob.total) {
    std::size_t best = n;
    double best_t = 0;
    for (std::size_t r = 0; r < n; ++r) {
      if (sol.samples[r] >= prob.max_samples[r]) continue;
      const double t = prob.per_sample_time[r] * static_cast<double>(sol.samples[r] + 1);
      if (best == n || t < best_t) {
        best = r;
        best_t = t;
      }
    }
    ++sol.samples[best];
    ++given;
  }
  for (std::size_t r = 0; r < n; ++r)
    sol.time = std::max(sol.time, prob.per_sample_time[r] * static_cast<double>(sol.samples[r]));
  return sol;
}

}  // namespace hetplan::search
