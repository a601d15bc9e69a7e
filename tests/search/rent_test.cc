// Renting: which subsets of a cluster's devices are searched, and the choice among them by time
// within a budget or by dollars per iteration, checked against a brute force over the subsets.
#include "hetplan/search/rent.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "hetplan/cluster/subcluster.h"
#include "hetplan/plan/export.h"
#include "hetplan/plan/run_form.h"
#include "hetplan/plan/validate.h"
#include "search_fixtures.h"

namespace hetplan::search {
namespace {

using testing::load_model_or_die;

// One node of two fast, dear GPUs and one of two slow, cheap ones (or `tail`'s prices).
cluster::Cluster fast_and_cheap(
    const std::string& prices = "prices: {H100-SXM5-80GB: 20, L4: 0.1}") {
  auto c = cluster::parse_cluster_yaml(R"(version: 1
nodes:
  - {group: fast, count: 1, device: H100-SXM5-80GB, devices_per_node: 2,
     intra_node: {bandwidth: 300GB/s}, nic: {bandwidth: 100Gbps}}
  - {group: slow, count: 1, device: L4, devices_per_node: 2,
     intra_node: {bandwidth: 32GB/s}, nic: {bandwidth: 100Gbps}}
)" + prices + "\n",
                                       "rent.yaml");
  EXPECT_TRUE(c) << c.error().message;
  return *c;
}

SearchOptions small_options() {
  SearchOptions o;
  o.global_batch = 16;
  return o;
}

const char* kModel = "gpt:layers=2,hidden=512,heads=8,seq=256,vocab=8000";

TEST(DeviceSubsets, EveryCountOfEveryGroupWholeClusterFirst) {
  const auto c = fast_and_cheap();
  const auto subsets = device_subsets(c, 100);
  // Each group offers 0, 1 or 2 devices: 3 x 3 - 1 subsets.
  ASSERT_EQ(subsets.size(), 8u);
  EXPECT_EQ(subsets.front(), (std::vector<int>{0, 1, 2, 3}));
  const std::vector<std::vector<int>> expected = {{0, 1, 2, 3}, {0, 1, 2}, {0, 1}, {0, 2, 3},
                                                  {0, 2},       {0},       {2, 3}, {2}};
  EXPECT_EQ(subsets, expected);
  EXPECT_EQ(subset_label(c, {0, 2, 3}), "1 x H100-SXM5-80GB + 2 x L4");
}

TEST(DeviceSubsets, NodesOfManyNodeGroupsAndThinning) {
  auto c = cluster::load_cluster("h100-a100-l4");
  ASSERT_TRUE(c) << c.error().message;
  // h100: one node of 8 -> 0,1,2,4,8 devices; a100: 2 nodes -> 0,1,2 nodes; l4: 2 nodes -> 0,1,2.
  const auto all = device_subsets(*c, 1000);
  EXPECT_EQ(all.size(), 5u * 3 * 3 - 1);
  for (const auto& s : all) {
    EXPECT_TRUE(std::is_sorted(s.begin(), s.end()));
    // A100 nodes are taken whole.
    const auto a100 = std::count_if(s.begin(), s.end(),
                                    [&](int d) { return c->type_of(d).name == "A100-SXM4-80GB"; });
    EXPECT_EQ(a100 % 8, 0);
  }
  const auto few = device_subsets(*c, 12);
  EXPECT_LE(few.size(), 12u);
  EXPECT_EQ(few.front().size(), 32u);  // the whole cluster stays first
}

TEST(Rent, UnpricedTypeIsOneClearError) {
  const auto m = load_model_or_die(kModel);
  const auto c = fast_and_cheap("prices: {}");  // catalog prices: the L4 has one
  auto gtx = cluster::parse_cluster_yaml(R"(version: 1
nodes:
  - {count: 1, device: GTX-1080Ti, devices_per_node: 2, intra_node: {bandwidth: 16GB/s},
     nic: {bandwidth: 10Gbps}}
)",
                                         "old.yaml");
  ASSERT_TRUE(gtx);
  auto r = find_plan_to_rent(m, *gtx, Algo::pipeline, small_options(), RentOptions{});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("no price for GTX-1080Ti"), std::string::npos)
      << r.error().message;
  EXPECT_TRUE(find_plan_to_rent(m, c, Algo::pipeline, small_options(), RentOptions{}));
}

// The brute force: every subset device_subsets offers, planned on its own, priced by the devices
// its plan uses.
struct Point {
  double time = 0, usd = 0, price = 0;
  std::vector<int> used;
};
std::vector<Point> brute_force(const model::Model& m, const cluster::Cluster& c) {
  std::vector<Point> out;
  for (const auto& subset : device_subsets(c, 100)) {
    std::vector<int> removed;
    for (int d = 0; d < c.num_devices(); ++d)
      if (!std::binary_search(subset.begin(), subset.end(), d)) removed.push_back(d);
    auto sub = cluster::without_devices(c, removed);
    EXPECT_TRUE(sub);
    auto res = find_plan(m, sub->cluster, Algo::pipeline, small_options());
    Point p;
    if (res && res->best.fits) {
      p.time = res->best.iteration_time_s;
      for (int d : plan::devices_node_by_node(res->best.plan, sub->cluster)) {
        p.used.push_back(sub->original[d]);
        p.price += sub->cluster.type_of(d).price_per_hour.value;
      }
      std::sort(p.used.begin(), p.used.end());
      p.usd = p.price * p.time / 3600;
    } else {
      p.time = -1;
    }
    out.push_back(p);
  }
  return out;
}

TEST(Rent, CostPicksTheCheapestSubsetAndTimeTheFastest) {
  const auto m = load_model_or_die(kModel);
  const auto c = fast_and_cheap();
  const auto oracle = brute_force(m, c);
  RentOptions ro;
  ro.objective = RentObjective::cost;
  auto cost = find_plan_to_rent(m, c, Algo::pipeline, small_options(), ro);
  ASSERT_TRUE(cost) << cost.error().message;
  ro.objective = RentObjective::time;
  auto time = find_plan_to_rent(m, c, Algo::pipeline, small_options(), ro);
  ASSERT_TRUE(time) << time.error().message;
  ASSERT_EQ(cost->subsets.size(), oracle.size());
  double best_usd = 1e300, best_time = 1e300;
  for (std::size_t i = 0; i < oracle.size(); ++i) {
    const auto& p = cost->subsets[i];
    ASSERT_EQ(p.fits, oracle[i].time > 0) << p.label;
    if (!p.fits) continue;
    EXPECT_DOUBLE_EQ(p.iteration_time_s, oracle[i].time) << p.label;
    EXPECT_NEAR(p.per_iteration.value, oracle[i].usd, 1e-12) << p.label;
    EXPECT_EQ(p.used, oracle[i].used) << p.label;
    best_usd = std::min(best_usd, oracle[i].usd);
    best_time = std::min(best_time, oracle[i].time);
  }
  // The chosen plan is within kRentTolerance of the best by the objective, and the best by the
  // other measure among those that are.
  EXPECT_NEAR(cost->subsets[cost->cheapest].per_iteration.value, best_usd, 1e-12);
  EXPECT_DOUBLE_EQ(time->subsets[time->fastest].iteration_time_s, best_time);
  const auto& cc = cost->subsets[cost->chosen];
  const auto& tc = time->subsets[time->chosen];
  EXPECT_LE(cc.per_iteration.value, best_usd * (1 + kRentTolerance));
  EXPECT_LE(tc.iteration_time_s, best_time * (1 + kRentTolerance));
  for (std::size_t i = 0; i < oracle.size(); ++i) {
    if (oracle[i].time < 0) continue;
    if (oracle[i].usd <= best_usd * (1 + kRentTolerance)) {
      EXPECT_GE(oracle[i].time, cc.iteration_time_s) << cost->subsets[i].label;
    }
    if (oracle[i].time <= best_time * (1 + kRentTolerance)) {
      EXPECT_GE(oracle[i].usd, tc.per_iteration.value) << time->subsets[i].label;
    }
  }
  // The dear fast type: fewer of it when money counts. The returned plan is the chosen one, in
  // the whole cluster's ids, and valid there.
  auto dear = [&](const SubsetPoint& p) {
    return std::count_if(p.used.begin(), p.used.end(), [&](int d) { return d < 2; });
  };
  EXPECT_LT(dear(cost->subsets[cost->chosen]), dear(time->subsets[time->chosen]));
  EXPECT_DOUBLE_EQ(cost->best.best.iteration_time_s, cost->subsets[cost->chosen].iteration_time_s);
  const auto used = plan::plan_devices(cost->best.best.plan);
  EXPECT_EQ(std::vector<int>(used.begin(), used.end()), cost->subsets[cost->chosen].used);
  EXPECT_TRUE(plan::validate_plan(cost->best.best.plan, m, c, "rented plan"));
}

TEST(Rent, CostlyPlannersRefineTheBestScreenedSubsets) {
  // auto screens every subset with the pipeline planner (as --algo pipeline does), then searches
  // the best four again with every planner: never dearer, and the others keep their screening.
  const auto m = load_model_or_die(kModel);
  const auto c = fast_and_cheap();
  auto screened = find_plan_to_rent(m, c, Algo::pipeline, small_options(), RentOptions{});
  ASSERT_TRUE(screened) << screened.error().message;
  auto refined = find_plan_to_rent(m, c, Algo::automatic, small_options(), RentOptions{});
  ASSERT_TRUE(refined) << refined.error().message;
  ASSERT_EQ(refined->subsets.size(), screened->subsets.size());
  int changed = 0;
  for (std::size_t i = 0; i < refined->subsets.size(); ++i) {
    const auto &a = screened->subsets[i], &b = refined->subsets[i];
    ASSERT_EQ(a.fits, b.fits) << a.label;
    if (!a.fits) continue;
    EXPECT_LE(b.per_iteration.value, a.per_iteration.value * (1 + 1e-12)) << a.label;
    changed += b.per_iteration.value < a.per_iteration.value;
  }
  EXPECT_LE(changed, 4);
  EXPECT_LE(refined->subsets[refined->chosen].per_iteration.value,
            screened->subsets[screened->chosen].per_iteration.value * (1 + 1e-12));
}

TEST(Rent, BudgetAndIterationTimeLimits) {
  const auto m = load_model_or_die(kModel);
  const auto c = fast_and_cheap();
  RentOptions ro;
  ro.objective = RentObjective::time;
  ro.budget_per_hour = UsdPerHour(20.5);  // one H100 and the L4s, not two H100s
  auto r = find_plan_to_rent(m, c, Algo::pipeline, small_options(), ro);
  ASSERT_TRUE(r) << r.error().message;
  const auto& chosen = r->subsets[r->chosen];
  EXPECT_LE(chosen.price.value, 20.5);
  for (const auto& p : r->subsets) {
    const double offered =
        20.0 * std::count_if(p.devices.begin(), p.devices.end(), [](int d) { return d < 2; }) +
        0.1 * std::count_if(p.devices.begin(), p.devices.end(), [](int d) { return d >= 2; });
    EXPECT_EQ(p.searched, offered <= 20.5) << p.label;
    if (p.fits) {
      EXPECT_GE(p.iteration_time_s * (1 + kRentTolerance), chosen.iteration_time_s) << p.label;
    }
  }
  ro.budget_per_hour = UsdPerHour(0.05);
  auto none = find_plan_to_rent(m, c, Algo::pipeline, small_options(), ro);
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("within the budget of $0.05 per hour: the cheapest choice, "
                                      "1 x L4, costs $0.1 per hour"),
            std::string::npos)
      << none.error().message;

  // The cheapest plan at least as fast as the limit.
  ro = RentOptions{};
  auto unlimited = find_plan_to_rent(m, c, Algo::pipeline, small_options(), ro);
  ASSERT_TRUE(unlimited);
  const double fastest = unlimited->subsets[unlimited->fastest].iteration_time_s;
  const double cheapest = unlimited->subsets[unlimited->cheapest].iteration_time_s;
  ASSERT_LT(fastest, cheapest);
  ro.max_iteration_time = Seconds((fastest + cheapest) / 2);
  auto limited = find_plan_to_rent(m, c, Algo::pipeline, small_options(), ro);
  ASSERT_TRUE(limited) << limited.error().message;
  EXPECT_LE(limited->subsets[limited->chosen].iteration_time_s, ro.max_iteration_time.value);
  for (const auto& p : limited->subsets)
    if (p.fits && p.iteration_time_s <= ro.max_iteration_time.value) {
      EXPECT_GE(p.per_iteration.value * (1 + kRentTolerance),
                limited->subsets[limited->chosen].per_iteration.value)
          << p.label;
    }
  ro.max_iteration_time = Seconds(fastest / 2);
  auto too_fast = find_plan_to_rent(m, c, Algo::pipeline, small_options(), ro);
  ASSERT_FALSE(too_fast);
  EXPECT_NE(too_fast.error().message.find("the fastest takes"), std::string::npos)
      << too_fast.error().message;
}

}  // namespace
}  // namespace hetplan::search
