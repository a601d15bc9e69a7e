// Simulator speed. The target: one iteration of GPT-3 175B on 1,536 A100s (tp=8, pp=8, dp=24,
// 1F1B, 2,304 sequences, micro-batch 1) in under 1 s on one core, and a cost that grows no worse
// than linearly with micro-batches times stages (see BM_SimulateScaling's time per pass).
#include <benchmark/benchmark.h>

#include <string>

#include "hetplan/cluster/cluster_file.h"
#include "hetplan/model/zoo.h"
#include "hetplan/plan/strategy.h"
#include "hetplan/sim/simulate.h"

namespace {

using namespace hetplan;

void run(benchmark::State& state, const std::string& model_spec, const std::string& cluster_spec,
         const std::string& strategy, double passes) {
  auto m = model::load_model(model_spec);
  auto c = cluster::load_cluster(cluster_spec);
  auto s = plan::parse_strategy(strategy);
  if (!m || !c || !s) {
    state.SkipWithError("bad benchmark input");
    return;
  }
  auto p = plan::plan_from_strategy(*s, *m, *c);
  if (!p) {
    state.SkipWithError(p.error().message.c_str());
    return;
  }
  long long events = 0, tasks = 0;
  for (auto _ : state) {
    auto r = sim::simulate(*m, *c, *p, sim::SimOptions{});
    if (!r) {
      state.SkipWithError(r.error().message.c_str());
      return;
    }
    events += r->num_events;
    tasks = r->num_tasks;
    benchmark::DoNotOptimize(r->iteration_time);
  }
  state.counters["events_per_s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
  state.counters["tasks"] = static_cast<double>(tasks);
  state.counters["passes"] = passes;
  state.counters["s_per_pass"] =
      benchmark::Counter(passes * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_Gpt3_175B_1536xA100(benchmark::State& state) {
  // 24 replicas x 8 stages x 96 micro-batches x 2 passes.
  run(state, "gpt3-175b", "dgx-a100:192", "dp=24,tp=8,pp=8,mbs=1,gbs=2304,schedule=1f1b",
      24.0 * 8 * 96 * 2);
}
BENCHMARK(BM_Gpt3_175B_1536xA100)->Unit(benchmark::kMillisecond);

// Micro-batches (arg 0) times stages (arg 1) on a fixed 8-way data-parallel GPT; seconds per pass
// should stay flat if the cost is linear.
void BM_SimulateScaling(benchmark::State& state) {
  const int mbs_count = static_cast<int>(state.range(0));
  const int pp = static_cast<int>(state.range(1));
  const int dp = 8;
  const std::string strategy =
      "dp=8,tp=1,pp=" + std::to_string(pp) + ",mbs=1,gbs=" + std::to_string(dp * mbs_count);
  run(state, "gpt:layers=64,hidden=1024,heads=16,seq=1024,vocab=51200",
      "dgx-a100:" + std::to_string(pp), strategy, 1.0 * dp * pp * mbs_count * 2);
}
BENCHMARK(BM_SimulateScaling)
    ->ArgsProduct({{16, 64, 256}, {2, 8, 32}})
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
