// The gradient synchronisation MILP (search/sync_milp.h).
#include "hetplan/search/sync_milp.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <map>

#include "hetplan/search/lp.h"
#include "hetplan/sim/grad_sync.h"

namespace hetplan::search {
namespace {

// Bytes on link `link` of a way's loads (ascending by link).
double load_on(const std::vector<cost::LinkLoad>& loads, int link) {
  auto it = std::lower_bound(loads.begin(), loads.end(), link,
                             [](const cost::LinkLoad& l, int v) { return l.link < v; });
  return it != loads.end() && it->link == link ? it->bytes : 0;
}

// Whether way a costs no more than way b in every term of the objective.
bool no_worse(const SyncWay& a, const SyncWay& b) {
  if (a.latency_s > b.latency_s) return false;
  for (const auto& l : a.loads)
    if (l.bytes > load_on(b.loads, l.link)) return false;
  for (std::size_t u = 0; u < a.compute_s.size(); ++u)
    if (a.compute_s[u] > (u < b.compute_s.size() ? b.compute_s[u] : 0)) return false;
  return true;
}

// The ways of an item worth a variable: allowed, and not dominated by another allowed way (no
// worse in every term, and better in one or earlier in kSyncWays). The objective is monotone in
// every term, so dropping a dominated way keeps the optimum.
std::array<bool, 3> useful_ways(const SyncItem& item) {
  std::array<bool, 3> keep{};
  for (int w = 0; w < 3; ++w) keep[w] = item.ways[w].allowed;
  for (int b = 0; b < 3; ++b)
    for (int a = 0; a < 3 && keep[b]; ++a)
      if (a != b && keep[a] && no_worse(item.ways[a], item.ways[b]) &&
          (a < b || !no_worse(item.ways[b], item.ways[a])))
        keep[b] = false;
  return keep;
}

// Every part's loads summed by link, ascending by link; each link's bytes are added in the parts'
// order (the sort is stable).
std::vector<cost::LinkLoad> summed_loads(const std::vector<cost::CollectiveCost>& parts) {
  std::vector<cost::LinkLoad> all;
  std::size_t total = 0;
  for (const auto& part : parts) total += part.loads.size();
  all.reserve(total);
  for (const auto& part : parts) all.insert(all.end(), part.loads.begin(), part.loads.end());
  std::stable_sort(all.begin(), all.end(), [](const cost::LinkLoad& a, const cost::LinkLoad& b) {
    return a.link < b.link;
  });
  std::vector<cost::LinkLoad> out;
  for (std::size_t i = 0; i < all.size();) {
    cost::LinkLoad sum{all[i].link, 0};
    for (; i < all.size() && all[i].link == sum.link; ++i) sum.bytes += all[i].bytes;
    if (sum.bytes > 0) out.push_back(sum);
  }
  return out;
}

SyncWay way_of(const std::vector<cost::CollectiveCost>& parts, bool allowed) {
  SyncWay w;
  w.allowed = allowed;
  w.loads = summed_loads(parts);
  // The parts run together: the slowest start-up counts once.
  for (const auto& part : parts) w.latency_s = std::max(w.latency_s, part.latency.value);
  return w;
}

}  // namespace

double sync_objective(const SyncRequest& req, const std::vector<int>& way) {
  assert(way.size() == req.items.size());
  std::vector<double> link_bytes(req.link_capacity.size(), 0);
  std::vector<double> unit_s(static_cast<std::size_t>(req.units), 0);
  for (const auto& l : req.fixed) link_bytes[l.link] += l.bytes;
  double latency = 0;
  for (std::size_t i = 0; i < req.items.size(); ++i) {
    const SyncWay& w = req.items[i].ways[way[i]];
    assert(w.allowed);
    latency += w.latency_s;
    for (const auto& l : w.loads) link_bytes[l.link] += l.bytes;
    for (std::size_t u = 0; u < w.compute_s.size(); ++u) unit_s[u] += w.compute_s[u];
  }
  double link = 0, compute = 0;
  for (std::size_t l = 0; l < link_bytes.size(); ++l)
    if (link_bytes[l] > 0) link = std::max(link, link_bytes[l] / req.link_capacity[l]);
  for (double t : unit_s) compute = std::max(compute, t);
  return link + compute + latency;
}

SyncChoice solve_sync_milp(const SyncRequest& req) {
  const std::size_t n = req.items.size();
  SyncChoice all_reduce;
  all_reduce.way.assign(n, kAllReduce);
  assert(std::all_of(req.items.begin(), req.items.end(),
                     [](const SyncItem& item) { return item.ways[kAllReduce].allowed; }));
  all_reduce.objective_s = sync_objective(req, all_reduce.way);
  if (n == 0) {
    all_reduce.status = SyncStatus::optimal;
    return all_reduce;
  }
  auto fall_back = [&](std::string why) {
    all_reduce.status = SyncStatus::fallback;
    all_reduce.warning = std::move(why);
    return all_reduce;
  };

  // The program. Items i, their useful ways w (useful_ways), links l with capacity cap_l, compute
  // units u (a replica of a stage):
  //
  //   min  T_link + T_comp + sum_{i,w} lat_iw x_iw
  //   s.t. sum_w x_iw = 1                                                     for every item i
  //        T_link - sum_{i,w} (bytes_iwl / cap_l) x_iw >= fixed_l / cap_l     for every link l
  //                                                                           an item's way loads
  //        T_comp - sum_{i,w} comp_iwu x_iw >= 0                              for every unit u
  //        x_iw in {0, 1};  T_link >= max_l fixed_l / cap_l;  T_comp >= 0
  //
  // T_link is the longest any link is busy with the synchronisation's bytes (the collectives
  // share the links, as the simulator runs them), T_comp the longest any replica spends
  // rebuilding gradients from sufficient factors; the two add up, as a rebuild waits for its
  // gather. Every way also pays its own latency (the simulator merges a bucket's collectives of
  // one way into one, so the latencies are counted a little high for every way alike).
  LpRequest lp;
  std::vector<double> fixed_bytes(req.link_capacity.size(), 0);
  for (const auto& l : req.fixed) fixed_bytes[l.link] += l.bytes;
  double fixed_time = 0;
  for (std::size_t l = 0; l < fixed_bytes.size(); ++l)
    if (fixed_bytes[l] > 0)
      fixed_time = std::max(fixed_time, fixed_bytes[l] / req.link_capacity[l]);
  const int t_link = lp.add_variable({"T_link", fixed_time, kInf, 1.0, false});
  const int t_comp = lp.add_variable({"T_comp", 0, kInf, 1.0, false});
  std::map<int, LpRow> link_rows;  // by link, in link order
  std::vector<LpRow> unit_rows(static_cast<std::size_t>(req.units));
  std::vector<std::array<int, 3>> var(n, {-1, -1, -1});
  for (std::size_t i = 0; i < n; ++i) {
    const SyncItem& item = req.items[i];
    const auto keep = useful_ways(item);
    LpRow one{fmt::format("one way for {}", item.name), {}, 1, 1};
    for (int w = 0; w < 3; ++w) {
      if (!keep[w]) continue;
      const SyncWay& way = item.ways[w];
      const int x =
          lp.add_variable({fmt::format("x[{}][{}]", item.name, plan::to_string(kSyncWays[w])), 0, 1,
                           way.latency_s, true});
      var[i][w] = x;
      one.terms.push_back({x, 1.0});
      for (const auto& l : way.loads) {
        LpRow& row = link_rows[l.link];
        row.terms.push_back({x, -l.bytes / req.link_capacity[l.link]});
      }
      for (std::size_t u = 0; u < way.compute_s.size(); ++u)
        if (way.compute_s[u] > 0) unit_rows[u].terms.push_back({x, -way.compute_s[u]});
    }
    lp.add_row(std::move(one));
  }
  // Rows with the same terms (the links of a ring alike, replicas alike: hundreds on a large
  // cluster) bound T_link or T_comp alike, so only the one with the largest lower bound counts:
  // one row each, the first of its kind by link or unit.
  std::map<std::vector<std::pair<int, double>>, std::size_t> row_of_terms;
  auto add_bounding_row = [&](LpRow row, int t, double lower) {
    auto [it, fresh] = row_of_terms.try_emplace(row.terms, lp.rows.size());
    if (!fresh) {
      lp.rows[it->second].lower = std::max(lp.rows[it->second].lower, lower);
      return;
    }
    row.terms.push_back({t, 1.0});
    row.lower = lower;
    lp.add_row(std::move(row));
  };
  for (auto& [link, row] : link_rows) {
    row.name = fmt::format("link {}", link);
    add_bounding_row(std::move(row), t_link, fixed_bytes[link] / req.link_capacity[link]);
  }
  for (std::size_t u = 0; u < unit_rows.size(); ++u) {
    if (unit_rows[u].terms.empty()) continue;
    unit_rows[u].name = fmt::format("unit {}", u);
    add_bounding_row(std::move(unit_rows[u]), t_comp, 0);
  }

  lp.node_limit = kSyncMilpNodeLimit;
  lp.time_limit_s = req.time_limit_s;
  auto solved = solve_checked(lp);
  if (!solved) return fall_back("sync MILP: " + solved.error().message);
  SyncChoice out;
  out.status = solved->status == LpStatus::limited ? SyncStatus::limited : SyncStatus::optimal;
  out.way.assign(n, kAllReduce);
  for (std::size_t i = 0; i < n; ++i)
    for (int w = 0; w < 3; ++w)
      if (var[i][w] >= 0 && solved->values[var[i][w]] > 0.5) out.way[i] = w;
  out.objective_s = sync_objective(req, out.way);
  // Never trusted blindly: the program's optimum must be what the objective says of its choice,
  // and no worse than all-reduce everywhere.
  const double tol = 1e-6 * std::max(out.objective_s, all_reduce.objective_s);
  if (std::fabs(out.objective_s - solved->objective) > tol)
    return fall_back(fmt::format("sync MILP: reported {} s but its choice evaluates to {} s",
                                 solved->objective, out.objective_s));
  if (out.objective_s > all_reduce.objective_s + tol)
    return fall_back(
        fmt::format("sync MILP: its choice ({} s) is slower than all-reduce everywhere ({} s)",
                    out.objective_s, all_reduce.objective_s));
  // Ties go to all-reduce: an item keeps another way only where going back costs something.
  for (std::size_t i = 0; i < n; ++i) {
    if (out.way[i] == kAllReduce) continue;
    std::vector<int> back = out.way;
    back[i] = kAllReduce;
    const double t = sync_objective(req, back);
    if (t <= out.objective_s) {
      out.way = std::move(back);
      out.objective_s = t;
    }
  }
  return out;
}

SyncRequest sync_request(const model::Model& m, const cluster::Cluster& c, const plan::Plan& p,
                         const sim::SimOptions& opts) {
  SyncRequest req;
  req.link_capacity = cost::link_rates(c, opts.network);
  const sim::GradSyncWays ways = sim::gradient_sync_ways(m, c, p, opts);
  if (ways.stopped) return req;
  req.fixed = summed_loads(ways.fixed);
  // Compute units: the replicas of every stage, stage by stage.
  std::vector<int> first_unit;
  for (const auto& st : p.stages) {
    first_unit.push_back(req.units);
    req.units += static_cast<int>(st.replicas.size());
  }
  for (const auto& op : ways.ops) {
    if (opts.stop && opts.stop()) {
      req.items.clear();
      return req;
    }
    SyncItem item;
    item.name = m.ops[op.op].name;
    item.ways[kAllReduce] = way_of(op.all_reduce, true);
    item.ways[kParameterServer] = way_of(op.parameter_server, p.zero_stage == 0);
    SyncWay& sfb = item.ways[kSufficientFactor];
    sfb = way_of(op.factor_gathers, true);
    sfb.compute_s.assign(static_cast<std::size_t>(req.units), 0);
    for (std::size_t r = 0; r < op.rebuild_s.size(); ++r)
      sfb.compute_s[first_unit[op.stage] + r] = op.rebuild_s[r];
    req.items.push_back(std::move(item));
  }
  return req;
}

}  // namespace hetplan::search
