// A plan hetplan writes is a promise, over the whole zoo: every zoo model planned on a preset
// cluster at its full scale by every planner, as `hetplan plan` plans it (only plans the runtime
// executes may be chosen), is a plan `hetplan run --check` accepts once written and read back.
// The search runs in this process (`plan` would start libtorch for each case); the check is the
// runtime's own, on the plan as its JSON gives it back.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "hetplan/cluster/cluster_file.h"
#include "hetplan/learn/tag_policy.h"
#include "hetplan/model/zoo.h"
#include "hetplan/plan/plan_json.h"
#include "hetplan/plan/validate.h"
#include "hetplan/runtime/run.h"
#include "hetplan/search/search.h"

namespace hetplan::runtime {
namespace {

struct Case {
  const char* cluster;
  std::int64_t global_batch;
  std::vector<search::Algo> algos;
};

// (What gtest prints of a case, and ctest's test names with it: the cluster.)
void PrintTo(const Case& k, std::ostream* os) { *os << k.cluster; }

std::string name_of(const ::testing::TestParamInfo<Case>& info) {
  std::string out;
  for (char ch : std::string(info.param.cluster)) out += std::isalnum(ch) ? ch : '_';
  return out;
}

class ZooPresetsRun : public ::testing::TestWithParam<Case> {};

// What `run --check` says of plan p, written and read back: "" when it runs at its full scale.
std::string check_written(const model::Model& m, const cluster::Cluster& c, const plan::Plan& p) {
  auto back = plan::plan_from_json(nlohmann::json::parse(plan::to_json_text(p)), "plan");
  if (!back) return back.error().message;
  if (auto ok = plan::validate_plan(*back, m, c, "plan"); !ok) return ok.error().message;
  const int world = static_cast<int>(plan::plan_devices(*back).size());
  const auto problems = executable_problems(m, executable_form(m, *back, world).plan, world);
  return problems.empty() ? std::string() : problems.front();
}

// Each model of the zoo on the cluster with each planner of the case (ft: every point of the
// frontier `pareto` prints), a 0.5 s search limit. Every plan a planner gives must pass the
// runtime's check at full scale. A single planner may give none (none of its plans fits or runs:
// `plan` then says so), but `auto` must give a plan whenever any planner gave one (unless the
// limit stopped it first).
TEST_P(ZooPresetsRun, EveryModelEveryPlannerRuns) {
  const Case& k = GetParam();
  auto c = cluster::load_cluster(k.cluster);
  ASSERT_TRUE(c) << c.error().message;
  std::shared_ptr<search::TagGuide> guide;
  if (auto g = learn::load_tag_policy(learn::default_policy_file())) guide = *g;
  int planned = 0, cases = 0;
  std::map<std::string, double> seconds;  // per planner, printed at the end
  for (const auto& preset : model::presets()) {
    auto m = model::load_model(preset.name);
    ASSERT_TRUE(m) << m.error().message;
    search::SearchOptions opts;
    opts.global_batch = k.global_batch;
    opts.time_limit_s = 0.5;
    opts.tag_guide = guide;
    opts.executable = [&m](const plan::Plan& p) { return why_not_runnable(*m, p); };
    bool any = false, automatic = false, automatic_timed_out = false;
    for (search::Algo algo : k.algos) {
      if (algo == search::Algo::heterog && !guide) continue;  // needs the shipped policy
      const std::string name = search::to_string(algo);
      const std::string what = name + " " + preset.name + " on " + k.cluster;
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<plan::Plan> written;
      if (algo == search::Algo::ft) {
        if (auto res = search::find_frontier(*m, *c, opts))
          for (const auto& point : res->points) written.push_back(point.plan);
      } else if (auto res = search::find_plan(*m, *c, algo, opts); res) {
        if (res->best.fits) written.push_back(res->best.plan);
        if (algo == search::Algo::automatic) automatic_timed_out = res->timed_out;
      }
      seconds[name] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      ++cases;
      if (written.empty()) continue;
      ++planned;
      any = true;
      automatic = automatic || algo == search::Algo::automatic;
      for (const auto& p : written) {
        const std::string why = check_written(*m, *c, p);
        EXPECT_EQ(why, "") << what;
      }
    }
    // (Unless its time ran out first: every planner shares auto's limit.)
    if (std::count(k.algos.begin(), k.algos.end(), search::Algo::automatic) &&
        !automatic_timed_out) {
      EXPECT_EQ(automatic, any) << "auto " << preset.name << " on " << k.cluster
                                << ": no plan, though a single planner gave one";
    }
  }
  // Most fit: the checks above are not vacuous.
  EXPECT_GE(planned, cases / 2) << planned << " of " << cases << " cases gave a plan";
  std::string times;
  for (const auto& [name, s] : seconds) times += fmt::format(" {} {:.1f} s", name, s);
  std::printf("%s: %d of %d cases gave plans; search time:%s\n", k.cluster, planned, cases,
              times.c_str());
}

const std::vector<search::Algo> kEvery = {
    search::Algo::automatic, search::Algo::dp,  search::Algo::megatron,
    search::Algo::uneven_dp, search::Algo::hap, search::Algo::pipeline,
    search::Algo::ft,        search::Algo::tag, search::Algo::heterog};

INSTANTIATE_TEST_SUITE_P(
    Presets, ZooPresetsRun,
    ::testing::Values(Case{"heterog-mixed", 64, kEvery}, Case{"tag-mixed", 64, kEvery},
                      Case{"hap-mixed", 64, kEvery}, Case{"a100-v100", 64, kEvery},
                      Case{"h100-a100-l4", 64, kEvery}, Case{"leaf-spine-mixed", 64, kEvery},
                      Case{"dgx-a100:1", 64, kEvery}, Case{"dgx-h100:2", 64, kEvery},
                      Case{"cpu:4", 16, kEvery}),
    name_of);

}  // namespace
}  // namespace hetplan::runtime
