// Planner speed (hetplan plan --algo auto: the three baselines plus the uneven-DP and pipeline
// planners, every candidate estimated and the best simulated). Targets on 2 cores: Llama-2 70B on
// 64 mixed GPUs under 10 s; OPT-350M on 512 mixed GPUs (A100-40GB + V100-16GB) under 2 s; a
// 4,096-GPU mixed cluster under 60 s. BM_SearchDevices and BM_SearchLayers show how search time
// grows with the cluster and the model. BM_PipelineLlama2_70B is the slowest case of the pipeline
// planner over the zoo and the presets of up to 64 GPUs that finds a plan (target: under 10 s;
// Llama-3 405B there searches longer and fits none).
#include <benchmark/benchmark.h>

#include <string>

#include "hetplan/cluster/cluster_file.h"
#include "hetplan/model/zoo.h"
#include "hetplan/search/search.h"

namespace {

using namespace hetplan;

// n nodes of 8x A100-80GB and n nodes of 8x V100-32GB on one 100 Gb/s switch.
std::string mixed_yaml(int nodes_each) {
  const std::string n = std::to_string(nodes_each);
  return "version: 1\nnodes:\n"
         "  - {group: a100, count: " +
         n +
         ", device: A100-SXM4-80GB, devices_per_node: 8,\n"
         "     intra_node: {bandwidth: 300GB/s, latency: 2us},\n"
         "     nic: {bandwidth: 200Gbps, count: 4, latency: 5us}}\n"
         "  - {group: v100, count: " +
         n +
         ", device: V100-SXM2-32GB, devices_per_node: 8,\n"
         "     intra_node: {bandwidth: 150GB/s, latency: 2us},\n"
         "     nic: {bandwidth: 100Gbps, count: 1, latency: 5us}}\n"
         "network: {kind: switch}\n";
}

void search(benchmark::State& state, const std::string& model_spec, const cluster::Cluster& c,
            std::int64_t batch, search::Algo algo = search::Algo::automatic) {
  auto m = model::load_model(model_spec);
  if (!m) {
    state.SkipWithError(m.error().message.c_str());
    return;
  }
  search::SearchOptions opts;
  opts.global_batch = batch;
  double best = 0;
  for (auto _ : state) {
    auto r = search::find_plan(*m, c, algo, opts);
    if (!r) {
      state.SkipWithError(r.error().message.c_str());
      return;
    }
    best = r->best.iteration_time_s;
    state.counters["simulated"] = r->plans_simulated;
  }
  state.counters["devices"] = c.num_devices();
  state.counters["layers"] = static_cast<double>(m->layers.size());
  state.counters["plan_s"] = best;
}

cluster::Cluster load(const std::string& spec_or_yaml, bool yaml) {
  auto c = yaml ? cluster::parse_cluster_yaml(spec_or_yaml, "bench")
                : cluster::load_cluster(spec_or_yaml);
  return c ? std::move(*c) : cluster::Cluster{};
}

void BM_Llama2_70B_64Mixed(benchmark::State& state) {
  search(state, "llama2-70b", load(mixed_yaml(4), true), 512);
}
BENCHMARK(BM_Llama2_70B_64Mixed)->Unit(benchmark::kSecond)->Iterations(1);

void BM_Opt350M_512Mixed(benchmark::State& state) {
  search(state, "opt-350m", load("mixed-512", false), 2048);
}
BENCHMARK(BM_Opt350M_512Mixed)->Unit(benchmark::kSecond)->Iterations(1);

void BM_Gpt3_6_7B_4096Mixed(benchmark::State& state) {
  search(state, "gpt3-6.7b", load("mixed-4096", false), 8192);
}
BENCHMARK(BM_Gpt3_6_7B_4096Mixed)->Unit(benchmark::kSecond)->Iterations(1);

void BM_PipelineLlama2_70B(benchmark::State& state) {
  search(state, "llama2-70b", load("h100-a100-l4", false), 256, search::Algo::pipeline);
}
BENCHMARK(BM_PipelineLlama2_70B)->Unit(benchmark::kSecond)->Iterations(1);

// Devices: GPT-3 1.3B on 2n mixed nodes.
void BM_SearchDevices(benchmark::State& state) {
  search(state, "gpt3-1.3b", load(mixed_yaml(static_cast<int>(state.range(0))), true), 1024);
}
BENCHMARK(BM_SearchDevices)
    ->Arg(1)
    ->Arg(4)
    ->Arg(16)
    ->Arg(64)
    ->Unit(benchmark::kSecond)
    ->Iterations(1);

// Layers: a GPT of n blocks (hidden 2048) on 64 mixed GPUs.
void BM_SearchLayers(benchmark::State& state) {
  search(
      state,
      "gpt:layers=" + std::to_string(state.range(0)) + ",hidden=2048,heads=16,seq=2048,vocab=51200",
      load(mixed_yaml(4), true), 512);
}
BENCHMARK(BM_SearchLayers)
    ->Arg(12)
    ->Arg(24)
    ->Arg(48)
    ->Arg(96)
    ->Unit(benchmark::kSecond)
    ->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
