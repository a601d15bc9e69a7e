// Simulated against measured: the Megatron-LM weak-scaling table (Narayanan et al., SC'21, Table 1,
// ../shared/reference/published-runs.md). One set of device and network parameters (the cost
// model's defaults) serves every row. Assumed where the paper's table is silent: micro-batch 1,
// full recomputation (the paper's setting), 1F1B schedule, no sequence parallelism, ZeRO off.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "hetplan/cluster/cluster_file.h"
#include "hetplan/model/zoo.h"
#include "hetplan/plan/strategy.h"
#include "hetplan/sim/simulate.h"

namespace hetplan::sim {
namespace {

struct Row {
  double billions;
  int heads, hidden, layers, tp, pp, gpus, batch;
  double published_tflops;
};

constexpr Row kRows[] = {
    {1.7, 24, 2304, 24, 1, 1, 32, 512, 137},
    {3.6, 32, 3072, 30, 2, 1, 64, 512, 138},
    {7.5, 32, 4096, 36, 4, 1, 128, 512, 142},
    {18.4, 48, 6144, 40, 8, 1, 256, 1024, 135},
    {39.1, 64, 8192, 48, 8, 2, 512, 1536, 138},
    {76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140},
    {145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148},
    {310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155},
    {529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163},
    {1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163},
};

double simulate_row(const Row& row) {
  const std::string spec = "gpt:layers=" + std::to_string(row.layers) +
                           ",hidden=" + std::to_string(row.hidden) +
                           ",heads=" + std::to_string(row.heads) + ",seq=2048,vocab=51200";
  auto m = model::load_model(spec);
  EXPECT_TRUE(m) << (m ? "" : m.error().message);
  auto c = cluster::load_cluster("dgx-a100:" + std::to_string(row.gpus / 8));
  EXPECT_TRUE(c) << (c ? "" : c.error().message);
  const int dp = row.gpus / (row.tp * row.pp);
  auto s = plan::parse_strategy("dp=" + std::to_string(dp) + ",tp=" + std::to_string(row.tp) +
                                ",pp=" + std::to_string(row.pp) +
                                ",mbs=1,gbs=" + std::to_string(row.batch) + ",recompute=full");
  EXPECT_TRUE(s);
  if (!m || !c || !s) return 0;
  auto p = plan::plan_from_strategy(*s, *m, *c);
  EXPECT_TRUE(p) << (p ? "" : p.error().message);
  if (!p) return 0;
  auto r = simulate(*m, *c, *p, SimOptions{});
  EXPECT_TRUE(r) << (r ? "" : r.error().message);
  if (!r) return 0;
  EXPECT_TRUE(r->fits) << row.billions << "B does not fit: " << r->max_peak_memory.value / 1e9
                       << " GB";
  return r->tflops_per_device;
}

TEST(MegatronAccuracy, EveryRowWithinTenPercent) {
  double sum = 0;
  std::printf("%8s %4s %4s %6s %10s %10s %7s\n", "params", "tp", "pp", "gpus", "published",
              "simulated", "error");
  for (const Row& row : kRows) {
    const double sim = simulate_row(row);
    const double err = std::abs(sim - row.published_tflops) / row.published_tflops;
    sum += err;
    std::printf("%8.1f %4d %4d %6d %10.0f %10.1f %6.1f%%\n", row.billions, row.tp, row.pp, row.gpus,
                row.published_tflops, sim, 100 * err);
    EXPECT_LT(err, 0.10) << row.billions << "B: simulated " << sim << " TFLOP/s, published "
                         << row.published_tflops;
  }
  std::printf("mean absolute error %.1f%% over %zu rows\n", 100 * sum / std::size(kRows),
              std::size(kRows));
}

}  // namespace
}  // namespace hetplan::sim
