// `plan` never returns a plan that its own time/memory frontier beats on both: on every GPU
// preset (the planner-scaling ones, mixed-512 and mixed-4096, aside), no frontier point is at
// least as fast and at least as small with one of the two better by more than 0.1%.
#include <gtest/gtest.h>

#include "hetplan/cluster/cluster_file.h"
#include "hetplan/model/zoo.h"
#include "hetplan/search/search.h"

namespace hetplan::search {
namespace {

TEST(FrontierDominance, NoFrontierPointBeatsThePlanOnBothTimeAndMemory) {
  auto m = model::load_model("gpt3-350m");
  ASSERT_TRUE(m.ok());
  int presets = 0;
  for (const auto& preset : cluster::cluster_presets()) {
    if (preset.name == "cpu" || preset.name == "mixed-512" || preset.name == "mixed-4096") continue;
    auto c = cluster::load_cluster(preset.name);
    ASSERT_TRUE(c.ok()) << preset.name;
    SearchOptions opts;
    opts.global_batch = 64;
    auto best = find_plan(*m, *c, Algo::automatic, opts);
    ASSERT_TRUE(best.ok()) << preset.name << ": " << best.error().message;
    ASSERT_TRUE(best->best.fits) << preset.name;
    auto front = find_frontier(*m, *c, opts);
    ASSERT_TRUE(front.ok()) << preset.name << ": " << front.error().message;
    const double t = best->best.iteration_time_s, mem = best->best.max_peak_bytes;
    for (const auto& point : front->points) {
      if (!point.fits) continue;
      const bool no_worse =
          point.iteration_time_s <= t * (1 + 1e-9) && point.max_peak_bytes <= mem * (1 + 1e-9);
      const bool better = point.iteration_time_s < t * 0.999 || point.max_peak_bytes < mem * 0.999;
      EXPECT_FALSE(no_worse && better)
          << preset.name << ": the frontier holds " << point.iteration_time_s << " s at "
          << point.max_peak_bytes / (1 << 30) << " GiB, the plan " << t << " s at "
          << mem / (1 << 30) << " GiB";
    }
    ++presets;
  }
  EXPECT_GE(presets, 8);
}

}  // namespace
}  // namespace hetplan::search
