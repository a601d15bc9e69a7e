#include "hetplan/search/rent.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <optional>

#include "hetplan/cluster/subcluster.h"
#include "hetplan/plan/plan_json.h"
#include "hetplan/plan/renumber.h"
#include "hetplan/plan/run_form.h"

namespace hetplan::search {
namespace {

// A node group (or, in the explicit form, a device type) whose first `count` blocks a subset
// takes, for count in `counts` (ascending, from 0 to all).
struct Unit {
  std::vector<std::vector<int>> blocks;  // nodes, or single devices of a lone node
  std::vector<int> counts;
};

std::vector<int> counts_up_to(int n) {
  std::vector<int> counts{0};
  for (int k = 1; k < n; k *= 2) counts.push_back(k);
  counts.push_back(n);
  return counts;
}

std::vector<Unit> units_of(const cluster::Cluster& c) {
  std::vector<Unit> units;
  auto singles = [](const std::vector<int>& devices) {
    Unit u;
    for (int d : devices) u.blocks.push_back({d});
    return u;
  };
  if (!c.groups.empty()) {
    for (const auto& g : c.groups) {
      std::vector<const cluster::Node*> nodes;
      for (const auto& node : c.nodes)
        if (node.group == g.name && !node.devices.empty()) nodes.push_back(&node);
      if (nodes.empty()) continue;
      Unit u;
      if (nodes.size() == 1) {
        u = singles(nodes.front()->devices);
      } else {
        for (const auto* node : nodes) u.blocks.push_back(node->devices);
      }
      units.push_back(std::move(u));
    }
  } else {
    for (std::size_t t = 0; t < c.device_types.size(); ++t) {
      std::vector<int> of_type;
      for (const auto& d : c.devices)
        if (d.type == static_cast<int>(t)) of_type.push_back(d.id);
      if (!of_type.empty()) units.push_back(singles(of_type));
    }
  }
  for (Unit& u : units) u.counts = counts_up_to(static_cast<int>(u.blocks.size()));
  return units;
}

long long combinations(const std::vector<Unit>& units) {
  long long n = 1;
  for (const Unit& u : units)
    n = std::min<long long>(n * static_cast<long long>(u.counts.size()), 1LL << 40);
  return n - 1;  // not the empty subset
}

bool has_price(const cluster::DeviceType& t) { return !t.price_source.empty(); }

UsdPerHour price_of(const cluster::Cluster& c, const std::vector<int>& devices) {
  UsdPerHour sum;
  for (int d : devices) sum += c.type_of(d).price_per_hour;
  return sum;
}

// A time no plan on `devices` can beat: the forward FLOPs of an iteration at the devices' summed
// peak (the backward pass and every overhead only add to it).
double time_floor_s(const model::Model& m, const cluster::Cluster& c,
                    const std::vector<int>& devices, std::int64_t global_batch) {
  double peak = 0;
  for (int d : devices) peak += c.type_of(d).peak(m.dtype).value;
  return peak > 0 ? m.forward_flops_per_sample() * static_cast<double>(global_batch) / peak : 0;
}

std::string dollars(double usd) {
  return usd >= 100 ? fmt::format("${:.0f}", usd) : fmt::format("${:.3g}", usd);
}

}  // namespace

std::vector<std::vector<int>> device_subsets(const cluster::Cluster& c, int max_subsets) {
  std::vector<Unit> units = units_of(c);
  // Thin the units with the most counts until the combinations fit (0 and all always stay).
  while (combinations(units) > max_subsets) {
    Unit* widest = nullptr;
    for (Unit& u : units)
      if (u.counts.size() > 2 && (!widest || u.counts.size() > widest->counts.size())) widest = &u;
    if (!widest) break;
    widest->counts.erase(widest->counts.begin() + static_cast<long>(widest->counts.size() / 2));
  }
  std::vector<std::vector<int>> subsets;
  // Mixed-radix count from "all of every unit" downwards, so the whole cluster comes first.
  std::vector<std::size_t> pick(units.size());
  for (std::size_t u = 0; u < units.size(); ++u) pick[u] = units[u].counts.size() - 1;
  while (static_cast<int>(subsets.size()) < max_subsets) {
    std::vector<int> devices;
    for (std::size_t u = 0; u < units.size(); ++u)
      for (int b = 0; b < units[u].counts[pick[u]]; ++b)
        devices.insert(devices.end(), units[u].blocks[b].begin(), units[u].blocks[b].end());
    if (devices.empty()) break;  // the all-zero pick is the last
    std::sort(devices.begin(), devices.end());
    subsets.push_back(std::move(devices));
    std::size_t u = units.size();
    while (u > 0 && pick[u - 1] == 0) {
      pick[u - 1] = units[u - 1].counts.size() - 1;
      --u;
    }
    if (u == 0) break;
    --pick[u - 1];
  }
  return subsets;
}

std::string subset_label(const cluster::Cluster& c, const std::vector<int>& devices) {
  std::vector<int> count(c.device_types.size(), 0);
  for (int d : devices) ++count[c.devices[d].type];
  std::string label;
  for (std::size_t t = 0; t < count.size(); ++t)
    if (count[t] > 0)
      label +=
          fmt::format("{}{} x {}", label.empty() ? "" : " + ", count[t], c.device_types[t].name);
  return label;
}

Result<RentResult> find_plan_to_rent(const model::Model& m, const cluster::Cluster& c, Algo algo,
                                     const SearchOptions& opts, const RentOptions& ro) {
  if (algo == Algo::ft) return Error{kFtIsPareto};  // (not once per subset of the devices)
  for (const auto& d : c.devices)
    if (!has_price(c.device_types[d.type]))
      return Error{fmt::format(
          "{}: no price for {} (give one in the cluster file, e.g. prices: {{{}: 1.50}} in US "
          "dollars per GPU-hour)",
          c.name, c.device_types[d.type].name, c.device_types[d.type].name)};
  RentResult out;
  for (auto& devices : device_subsets(c, ro.max_subsets)) {
    SubsetPoint p;
    p.label = subset_label(c, devices);
    p.devices = std::move(devices);
    const UsdPerHour offered = price_of(c, p.devices);
    const double floor_s = time_floor_s(m, c, p.devices, opts.global_batch);
    if (ro.budget_per_hour.value > 0 && offered > ro.budget_per_hour) {
      p.note = fmt::format("over the budget: {}/h", dollars(offered.value));
    } else if (ro.max_iteration_time.value > 0 && floor_s > ro.max_iteration_time.value) {
      p.note = fmt::format("too slow: even at peak FLOP/s an iteration takes {:.3g} s", floor_s);
    } else {
      p.searched = true;
    }
    out.subsets.push_back(std::move(p));
  }
  const auto searched = std::count_if(out.subsets.begin(), out.subsets.end(),
                                      [](const SubsetPoint& p) { return p.searched; });
  if (searched == 0) {
    const auto& all = out.subsets.front();
    if (ro.budget_per_hour.value > 0) {
      const auto cheapest = std::min_element(
          out.subsets.begin(), out.subsets.end(), [&](const SubsetPoint& a, const SubsetPoint& b) {
            return price_of(c, a.devices) < price_of(c, b.devices);
          });
      return Error{fmt::format(
          "no devices of {} are within the budget of {} per hour: the cheapest choice, {}, costs "
          "{} per hour",
          c.name, dollars(ro.budget_per_hour.value), cheapest->label,
          dollars(price_of(c, cheapest->devices).value))};
    }
    return Error{fmt::format("no devices of {} can reach an iteration time of {:.3g} s: {}", c.name,
                             ro.max_iteration_time.value, all.note)};
  }

  // Screening: every subset with `algo`, or, where that is the costly search (auto, TAG,
  // HeteroG), with the pipeline planner and the baselines; then `algo` on the best few.
  const bool costly = algo == Algo::automatic || algo == Algo::tag || algo == Algo::heterog;
  const Algo screen = costly ? Algo::pipeline : algo;
  const auto refined = static_cast<std::size_t>(costly ? std::max(0, ro.refine) : 0);
  SearchOptions o = opts;
  if (opts.time_limit_s > 0)
    o.time_limit_s =
        opts.time_limit_s / static_cast<double>(static_cast<std::size_t>(searched) +
                                                std::min<std::size_t>(refined, searched));
  std::vector<std::optional<SearchResult>> results(out.subsets.size());
  // Searches subset i with planner a; keeps the result when it fits and beats what i has.
  auto search = [&](std::size_t i, Algo a) -> Result<bool> {
    SubsetPoint& p = out.subsets[i];
    auto sub = cluster::without_devices(c, cluster::other_devices(c, p.devices));
    if (!sub) return sub.error();
    if (opts.progress) opts.progress(fmt::format("rent: {} on {}", to_string(a), p.label));
    auto res = find_plan(m, sub->cluster, a, o);
    if (!res || !res->best.fits) {
      if (!p.fits) p.note = res ? shortfall_message(sub->cluster, res->best) : res.error().message;
      return false;
    }
    const auto used_set = plan::plan_devices(res->best.plan);
    std::vector<int> used;
    for (int d : used_set) used.push_back(sub->original[d]);
    const UsdPerHour price = price_of(c, used);
    const double t = res->best.iteration_time_s;
    if (p.fits) {
      const bool by_time = ro.objective == RentObjective::time;
      const double before = by_time ? p.iteration_time_s : p.per_iteration.value;
      if (!((by_time ? t : (price * Seconds(t)).value) < before)) return false;
    }
    res->best.plan = plan::renumber_devices(res->best.plan, sub->original);
    res->best.fingerprint = plan::plan_fingerprint(res->best.plan);
    p.fits = true;
    p.planner = res->planner;
    p.iteration_time_s = t;
    p.used = std::move(used);
    p.price = price;
    p.per_iteration = price * Seconds(t);
    p.note = ro.max_iteration_time.value > 0 && t > ro.max_iteration_time.value
                 ? fmt::format("slower than {:.3g} s", ro.max_iteration_time.value)
                 : std::string();
    results[i] = std::move(*res);
    return true;
  };
  for (std::size_t i = 0; i < out.subsets.size(); ++i)
    if (out.subsets[i].searched)
      if (auto r = search(i, screen); !r) return r.error();
  if (refined > 0) {
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < out.subsets.size(); ++i)
      if (out.subsets[i].fits && out.subsets[i].note.empty()) order.push_back(i);
    auto key = [&](std::size_t i) {
      return ro.objective == RentObjective::time ? out.subsets[i].iteration_time_s
                                                 : out.subsets[i].per_iteration.value;
    };
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return key(a) < key(b); });
    if (order.size() > refined) order.resize(refined);
    for (std::size_t i : order)
      if (auto r = search(i, algo); !r) return r.error();
  }

  // Ties go to the other measure, then to the earlier subset (more devices first).
  auto faster = [&](int a, int b) {
    const auto &x = out.subsets[a], &y = out.subsets[b];
    if (x.iteration_time_s != y.iteration_time_s) return x.iteration_time_s < y.iteration_time_s;
    return x.per_iteration < y.per_iteration;
  };
  auto cheaper = [&](int a, int b) {
    const auto &x = out.subsets[a], &y = out.subsets[b];
    if (x.per_iteration != y.per_iteration) return x.per_iteration < y.per_iteration;
    return x.iteration_time_s < y.iteration_time_s;
  };
  // The best by the objective among the plans within the limits; then, among those within
  // kRentTolerance of it, the best by the other measure.
  const bool by_time = ro.objective == RentObjective::time;
  int best = -1;
  for (int i = 0; i < static_cast<int>(out.subsets.size()); ++i) {
    const SubsetPoint& p = out.subsets[i];
    if (!p.fits) continue;
    if (out.fastest < 0 || faster(i, out.fastest)) out.fastest = i;
    if (out.cheapest < 0 || cheaper(i, out.cheapest)) out.cheapest = i;
    if (!p.note.empty()) continue;  // misses the iteration-time limit
    if (best < 0 || (by_time ? faster(i, best) : cheaper(i, best))) best = i;
  }
  for (int i = 0; best >= 0 && i < static_cast<int>(out.subsets.size()); ++i) {
    const SubsetPoint& p = out.subsets[i];
    if (!p.fits || !p.note.empty()) continue;
    const bool near =
        by_time
            ? p.iteration_time_s <= out.subsets[best].iteration_time_s * (1 + kRentTolerance)
            : p.per_iteration.value <= out.subsets[best].per_iteration.value * (1 + kRentTolerance);
    if (near && (out.chosen < 0 || (by_time ? cheaper(i, out.chosen) : faster(i, out.chosen))))
      out.chosen = i;
  }
  if (out.chosen < 0) {
    if (out.fastest >= 0) {
      const auto& f = out.subsets[out.fastest];
      return Error{fmt::format(
          "no plan on {} reaches an iteration time of {:.3g} s: the fastest takes {:.4g} s on {}",
          c.name, ro.max_iteration_time.value, f.iteration_time_s, f.label)};
    }
    const auto first = std::find_if(out.subsets.begin(), out.subsets.end(),
                                    [](const SubsetPoint& p) { return p.searched; });
    return Error{
        fmt::format("{} on {}: no plan fits on {}: {}", m.name, c.name, first->label, first->note)};
  }
  out.best = std::move(*results[out.chosen]);
  return out;
}

}  // namespace hetplan::search
