#include "op_level_layout.h"

#include <set>

#include "hetplan/plan/op_groups.h"

namespace hetplan::runtime::detail {

std::vector<int> op_level_devices(const plan::Plan& p) {
  std::set<int> d;
  for (const auto& g : p.op_groups) d.insert(g.devices.begin(), g.devices.end());
  return {d.begin(), d.end()};
}

// Rows [lo, hi) cut into consecutive intervals by `weights` (share_counts' rounding).
std::vector<std::pair<std::int64_t, std::int64_t>> cut_rows(std::int64_t lo, std::int64_t hi,
                                                            const std::vector<double>& weights) {
  SharePlace by;
  by.size = static_cast<int>(weights.size());
  by.shares = weights;
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  std::int64_t at = lo;
  for (std::int64_t n : share_counts(hi - lo, by)) {
    out.emplace_back(at, at + n);
    at += n;
  }
  return out;
}

OpLevelLayout::OpLevelLayout(const model::Model& m, const plan::Plan& p)
    : devices(op_level_devices(p)) {
  group = plan::group_of_ops(p, m);
  for (const auto& g : p.op_groups) {
    std::vector<int> ranks, reps;
    std::vector<double> s, t;
    for (std::size_t j = 0; j < g.devices.size(); ++j) {
      ranks.push_back(static_cast<int>(
          std::lower_bound(devices.begin(), devices.end(), g.devices[j]) - devices.begin()));
      s.push_back(plan::group_share(g, j));
      t.push_back(plan::tensor_share(g, j));
      reps.push_back(plan::replica_of(g, j));
    }
    const int R = plan::replica_count(g);
    std::vector<double> rs;
    for (int r = 0; r < R; ++r) rs.push_back(plan::group_share(g, plan::replica_begin(g, r)));
    std::vector<std::vector<int>> order(static_cast<std::size_t>(R));
    for (std::size_t j = 0; j < ranks.size(); ++j)
      order[static_cast<std::size_t>(reps[j])].push_back(static_cast<int>(j));
    for (auto& o : order)
      std::sort(o.begin(), o.end(), [&](int a, int b) { return ranks[a] < ranks[b]; });
    members.push_back(std::move(ranks));
    shares.push_back(std::move(s));
    split.push_back(g.mode == plan::GroupMode::split);
    tensor_shares.push_back(std::move(t));
    replica.push_back(std::move(reps));
    replica_shares.push_back(std::move(rs));
    by_rank.push_back(std::move(order));
    aligned.push_back(!plan::replica_places(g).empty());
    layout_id.push_back(layout_id.size());
    for (std::size_t o = 0; o + 1 < layout_id.size(); ++o)
      if (plan::same_split_layout(p.op_groups[o], g)) {
        layout_id.back() = o;
        break;
      }
  }
}

}  // namespace hetplan::runtime::detail
