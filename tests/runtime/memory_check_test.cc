// The memory pre-check's estimate: the whole fp32 model that every rank builds in host memory,
// then each rank's part of the weights, gradients, Adam's moments and activations from the
// simulator, carried over to fp32.
#include "hetplan/runtime/memory_check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "hetplan/cluster/cluster_file.h"
#include "hetplan/cost/memory_cost.h"
#include "hetplan/model/zoo.h"
#include "hetplan/plan/strategy.h"

namespace hetplan::runtime {
namespace {

// rank_memory of a 4-layer MLP in `dtype` over two CPU workers, a stage each (pp=2), and the
// model's parameters; no ranks when something fails (and the test with it).
struct Need {
  double params = 0;
  std::vector<RankMemory> ranks;
};
Need two_stage_mlp(const std::string& dtype) {
  auto m = model::load_model("mlp:layers=4,hidden=64,in=32,out=10,dtype=" + dtype);
  auto c = cluster::load_cluster("cpu:2", "--cluster");
  auto s = plan::parse_strategy("pp=2,gbs=8,mbs=4");
  EXPECT_TRUE(m && c && s) << dtype;
  if (!m || !c || !s) return {};
  auto p = plan::plan_from_strategy(*s, *m, *c);
  EXPECT_TRUE(p) << (p ? "" : p.error().message);
  if (!p) return {};
  auto need = rank_memory(*m, *c, *p);
  EXPECT_TRUE(need) << (need ? "" : need.error().message);
  if (!need) return {};
  return {static_cast<double>(m->parameters()), *need};
}

TEST(MemoryCheck, EachRankBuildsTheWholeModelAndTrainsItsPart) {
  const Need need = two_stage_mlp("fp32");
  ASSERT_EQ(need.ranks.size(), 2u);
  const double whole = 4.0 * need.params;
  double weights = 0, grads = 0;
  for (const RankMemory& r : need.ranks) {
    EXPECT_FALSE(r.gpu);
    EXPECT_DOUBLE_EQ(r.whole_model.value, whole);
    // fp32: 4-byte weights and gradients and 8 bytes of Adam moments per parameter of its stage.
    EXPECT_DOUBLE_EQ(r.gradients.value, r.weights.value);
    EXPECT_DOUBLE_EQ(r.optimizer.value, 2 * r.gradients.value);
    EXPECT_GT(r.activations.value, 0);
    weights += r.weights.value;
    grads += r.gradients.value;
    // The whole model while it is built, or the part trained, whichever is more; on a CPU that is
    // host memory.
    EXPECT_DOUBLE_EQ(r.trained().value, (r.weights + r.sixteen_bit_weights + r.gradients +
                                         r.optimizer + r.activations + r.gradient_buffers)
                                            .value);
    EXPECT_DOUBLE_EQ(r.total().value, std::max(whole, r.trained().value) + r.process.value);
    EXPECT_DOUBLE_EQ(r.host().value, r.total().value);
  }
  EXPECT_DOUBLE_EQ(weights, whole);  // the two stages' parameters are the model's
  EXPECT_DOUBLE_EQ(grads, whole);
  EXPECT_EQ(memory_shortfall(need.ranks, Bytes(1e12)), "");
  const std::string why = memory_shortfall(need.ranks, Bytes(1e6));
  EXPECT_EQ(why.rfind("memory: the 2 rank(s) need about ", 0), 0u) << why;
}

// The runtime trains 16-bit models with fp32 weights, gradients and moments: in bf16 (whose
// gradients the simulator counts at 4 bytes) and fp16 (at 2) alike, 4 + 8 bytes per parameter.
TEST(MemoryCheck, SixteenBitModelsCarryOverToFp32Gradients) {
  for (const char* dtype : {"bf16", "fp16"}) {
    const Need need = two_stage_mlp(dtype);
    ASSERT_EQ(need.ranks.size(), 2u) << dtype;
    double weights = 0, grads = 0;
    for (const RankMemory& r : need.ranks) {
      EXPECT_DOUBLE_EQ(r.optimizer.value, 2 * r.gradients.value) << dtype;
      weights += r.weights.value;
      grads += r.gradients.value;
    }
    EXPECT_DOUBLE_EQ(weights, 4.0 * need.params) << dtype;
    EXPECT_DOUBLE_EQ(grads, 4.0 * need.params) << dtype;
  }
}

// Under ZeRO-2 and -3 over replicas that split alike the runtime reduces each backward pass's
// gradients to their slices bucket by bucket (SliceBuckets) where four of its largest buckets take
// less than its whole gradients: a rank holds its slice of them and those buckets in fp32.
// Elsewhere (one bucket of a small model's gradients; a tied head over a pipeline, whose copies
// are summed whole) it holds them whole until the passes are done, and a flat copy beyond the
// activations.
TEST(MemoryCheck, ZeroTwoAndThreeHoldASliceOfTheGradientsAndTheBucketsInFlight) {
  auto c = cluster::load_cluster("cpu:4", "--cluster");
  ASSERT_TRUE(c);
  auto ranks = [&](const model::Model& m, const std::string& strategy) {
    auto s = plan::parse_strategy(strategy);
    EXPECT_TRUE(s);
    auto p = plan::plan_from_strategy(*s, m, *c);
    EXPECT_TRUE(p) << p.error().message;
    auto need = rank_memory(m, *c, *p);
    EXPECT_TRUE(need) << need.error().message;
    return *need;
  };
  auto small = model::load_model("mlp:layers=4,hidden=64,in=32,out=10");
  ASSERT_TRUE(small);
  const double whole = 4.0 * static_cast<double>(small->parameters());
  for (const char* strategy : {"dp=2,gbs=8,zero=2", "dp=2,gbs=8,zero=3"}) {
    const auto need = ranks(*small, strategy);
    ASSERT_EQ(need.size(), 2u);
    for (const RankMemory& r : need) {
      // ZeRO-3 slices the weights between passes, but gathers them whole for each pass.
      EXPECT_DOUBLE_EQ(r.weights.value, whole) << strategy;
      EXPECT_DOUBLE_EQ(r.gradients.value, whole) << strategy;
      // Adam's moments and the fp32 slice of the weights it steps are sliced: 12 bytes for each
      // of half the parameters.
      EXPECT_DOUBLE_EQ(r.optimizer.value, 1.5 * whole) << strategy;
      EXPECT_DOUBLE_EQ(r.gradient_buffers.value, std::max(0.0, whole - r.activations.value))
          << strategy;
    }
  }
  // 23 hidden layers of 2048 x 2048 (16.8 MB in fp32): 25 MB buckets from the last, the largest
  // of the head and two hidden layers.
  auto wide = model::load_model("mlp:layers=24,hidden=2048,in=32,out=10,dtype=fp32");
  ASSERT_TRUE(wide);
  const double hidden = 4.0 * (2048.0 * 2048 + 2048);
  for (const RankMemory& r : ranks(*wide, "dp=2,gbs=8,zero=2")) {
    EXPECT_DOUBLE_EQ(r.gradients.value, 2.0 * static_cast<double>(wide->parameters()));
    EXPECT_DOUBLE_EQ(r.gradient_buffers.value, 4 * (2 * hidden + 4.0 * (2048 * 10 + 10)));
    EXPECT_NE(trained_parts(r).find(", gradient buffers "), std::string::npos) << trained_parts(r);
  }
  // A GPT's tied head over two stages: its copies are summed whole, so are the stages' gradients.
  auto gpt = model::load_model("gpt:layers=2,hidden=64,heads=4,seq=16,vocab=128");
  ASSERT_TRUE(gpt);
  for (const RankMemory& r : ranks(*gpt, "pp=2,dp=2,gbs=8,mbs=2,zero=2")) {
    const double mine = r.weights.value;  // its stage's part, whole
    EXPECT_DOUBLE_EQ(r.gradients.value, mine);
    EXPECT_DOUBLE_EQ(r.gradient_buffers.value, std::max(0.0, mine - r.activations.value));
  }
}

// On a GPU the runtime keeps the same states (in bf16, the linear weights in 16 bits and an fp32
// master); its activations are in the run's precision, and
// beyond the tensors it holds the CUDA context and workspaces the simulator reserves.
TEST(MemoryCheck, OnAGpuActivationsAreInTheRunsPrecisionBesideTheCudaContext) {
  auto m = model::load_model("gpt:layers=2,hidden=64,heads=4,seq=32,vocab=256,dtype=bf16");
  auto c = cluster::load_cluster("dgx-a100:1", "--cluster");
  auto s = plan::parse_strategy("dp=2,gbs=8");
  ASSERT_TRUE(m && c && s);
  auto p = plan::plan_from_strategy(*s, *m, *c);
  ASSERT_TRUE(p) << p.error().message;
  auto cpu = rank_memory(*m, *c, *p);
  auto fp32 = rank_memory(*m, *c, *p, {true, model::DType::fp32});
  auto bf16 = rank_memory(*m, *c, *p, {true, model::DType::bf16});
  ASSERT_TRUE(cpu && fp32 && bf16);
  ASSERT_EQ(bf16->size(), 2u);
  const cost::MemoryConfig outside;
  for (std::size_t i = 0; i < 2; ++i) {
    const RankMemory &a = (*cpu)[i], &g = (*fp32)[i], &h = (*bf16)[i];
    EXPECT_DOUBLE_EQ(a.process.value, 180.0 * 1024 * 1024);
    EXPECT_DOUBLE_EQ(g.process.value, (outside.context + outside.workspace).value);
    EXPECT_DOUBLE_EQ(h.process.value, g.process.value);
    EXPECT_FALSE(a.gpu);
    for (const RankMemory* r : {&g, &h}) {
      EXPECT_TRUE(r->gpu);
      EXPECT_DOUBLE_EQ(r->whole_model.value, a.whole_model.value);
      // (bf16 holds the linear layers' weights in 16 bits.)
      EXPECT_DOUBLE_EQ((r->weights + r->sixteen_bit_weights * 2.0).value, a.weights.value);
      // The whole model stays in host memory: the GPU holds the part trained and the context.
      EXPECT_DOUBLE_EQ(r->total().value, r->trained().value + r->process.value);
      EXPECT_DOUBLE_EQ(r->host().value, a.whole_model.value + 180.0 * 1024 * 1024);
      EXPECT_DOUBLE_EQ(r->gradients.value, a.gradients.value);
    }
    // Adam's moments, and in bf16 the 16-bit weights' fp32 master beside them.
    EXPECT_DOUBLE_EQ(g.optimizer.value, a.optimizer.value);
    EXPECT_DOUBLE_EQ(h.optimizer.value, a.optimizer.value + 2 * h.sixteen_bit_weights.value);
    EXPECT_GT(h.sixteen_bit_weights.value, 0);
    EXPECT_DOUBLE_EQ(g.sixteen_bit_weights.value, 0);
    EXPECT_DOUBLE_EQ(g.activations.value, a.activations.value);  // fp32 on either
    // bf16: the simulator's activations as they are (the model's dtype); the transient loss
    // buffers are fp32 on either.
    EXPECT_LT(h.activations.value, g.activations.value);
    EXPECT_GT(h.activations.value, g.activations.value / 2);
  }
}

// In bf16 or fp16 the runtime holds the linear layers' weights in 16 bits and their fp32 master
// beside Adam's moments (under ZeRO-1 and -2 in the rank's slices): GPT of 2 blocks of width 64
// (each block's QKV 64x192, projection 64x64, MLP 64x256 and 256x64: 49,152 weights), on GPUs or
// CPUs alike; not in fp32, nor under ZeRO-3 over several replicas.
TEST(MemoryCheck, MixedPrecisionHoldsTheLinearWeightsIn16Bits) {
  auto m = model::load_model("gpt:layers=2,hidden=64,heads=4,seq=32,vocab=256,dtype=bf16");
  auto c = cluster::load_cluster("dgx-a100:1", "--cluster");
  ASSERT_TRUE(m && c);
  const double params = static_cast<double>(m->parameters()), linear = 2 * 49152.0;
  auto need = [&](const std::string& strategy, RankHost host) {
    auto s = plan::parse_strategy(strategy);
    EXPECT_TRUE(s);
    auto p = plan::plan_from_strategy(*s, *m, *c);
    EXPECT_TRUE(p) << p.error().message;
    auto r = rank_memory(*m, *c, *p, host);
    EXPECT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->size(), 2u);
    return r->front();
  };
  for (const auto& [strategy, replicas] :
       {std::pair{"dp=2,gbs=8,zero=1", 2.0}, std::pair{"dp=2,gbs=8,zero=2", 2.0},
        std::pair{"dp=2,gbs=8", 1.0}})
    for (bool gpu : {true, false})
      for (auto precision : {model::DType::bf16, model::DType::fp16}) {
        const RankMemory r = need(strategy, {gpu, precision});
        EXPECT_DOUBLE_EQ(r.sixteen_bit_weights.value, 2 * linear) << strategy;
        EXPECT_DOUBLE_EQ(r.weights.value, 4 * (params - linear)) << strategy;
        // Adam's two moments and the fp32 master it steps: under ZeRO of half the parameters,
        // else the moments of all and the master of the 16-bit weights.
        EXPECT_DOUBLE_EQ(r.optimizer.value,
                         replicas > 1 ? 12 * params / replicas : 8 * params + 4 * linear)
            << strategy;
        EXPECT_NE(trained_parts(r).find("its part of the weights "), std::string::npos);
        EXPECT_NE(trained_parts(r).find("(its linear layers' 192.00 KiB in 16 bits)"),
                  std::string::npos)
            << trained_parts(r);
      }
  for (const auto& [strategy, precision] : {std::pair{"dp=2,gbs=8,zero=1", model::DType::fp32},
                                            std::pair{"dp=2,gbs=8", model::DType::fp32},
                                            std::pair{"dp=2,gbs=8,zero=3", model::DType::bf16}}) {
    const RankMemory r = need(strategy, {true, precision});
    EXPECT_DOUBLE_EQ(r.sixteen_bit_weights.value, 0) << strategy;
    EXPECT_EQ(trained_parts(r).rfind("its part of the fp32 weights ", 0), 0u) << strategy;
  }
}

TEST(MemoryCheck, AGpusFreeMemoryAsNvidiaSmiSaysIt) {
  EXPECT_EQ(parse_gpu_free_mib("81037\n"), Bytes(81037.0 * 1024 * 1024));
  EXPECT_EQ(parse_gpu_free_mib(" 0 "), Bytes(0));
  EXPECT_FALSE(parse_gpu_free_mib(""));
  EXPECT_FALSE(parse_gpu_free_mib("[N/A]\n"));
  EXPECT_FALSE(parse_gpu_free_mib("81037\n40000\n"));  // two devices: not one answer
  EXPECT_FALSE(parse_gpu_free_mib("-5"));
  EXPECT_FALSE(parse_gpu_free_mib("12MiB"));
  // A CUDA_VISIBLE_DEVICES entry that is neither an index nor a UUID is not passed to a shell.
  const char* was = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::string before = was ? was : "";
  ::setenv("CUDA_VISIBLE_DEVICES", "0;touch /tmp/hetplan_never", 1);
  EXPECT_FALSE(gpu_free_memory(0));
  EXPECT_FALSE(std::filesystem::exists("/tmp/hetplan_never"));
  if (was)
    ::setenv("CUDA_VISIBLE_DEVICES", before.c_str(), 1);
  else
    ::unsetenv("CUDA_VISIBLE_DEVICES");
}

TEST(MemoryCheck, ARankThatDoesNotFitOnItsGpuIsRefusedWithTheNumbers) {
  RankMemory r;
  r.device = 3;
  r.gpu = true;
  r.whole_model = Bytes(16.0 * 1024 * 1024 * 1024);  // in host memory: not counted on the GPU
  r.weights = Bytes(4.0 * 1024 * 1024 * 1024);
  r.gradients = Bytes(1024.0 * 1024 * 1024);
  r.optimizer = Bytes(2048.0 * 1024 * 1024);
  r.activations = Bytes(512.0 * 1024 * 1024);
  r.process = Bytes(672.0 * 1024 * 1024);
  EXPECT_EQ(gpu_memory_shortfall(r, 1, r.total()), "");
  EXPECT_EQ(gpu_memory_shortfall(r, 1, Bytes(1e12)), "");
  EXPECT_EQ(gpu_memory_shortfall(r, 1, Bytes(8.0 * 1024 * 1024 * 1024)),
            "memory: the rank running device 3 needs about 8.16 GiB on its GPU (CUDA device 1) "
            "but 8.00 GiB is free there: its part of the fp32 weights 4.00 GiB, gradients 1.00 "
            "GiB, Adam 2.00 GiB, activations 512.00 MiB, the CUDA context and workspaces 672.00 "
            "MiB; use a smaller model or batch, a plan that holds less per device, or "
            "--no-memory-check");
  // In host memory each such rank holds the whole model while it builds it.
  const std::vector<RankMemory> two{r, r};
  EXPECT_EQ(memory_shortfall(two, Bytes(40.0 * 1024 * 1024 * 1024)), "");
  EXPECT_EQ(memory_shortfall(two, Bytes(32.0 * 1024 * 1024 * 1024)),
            "memory: the 2 rank(s) need about 32.35 GiB on this host but 32.00 GiB is available; "
            "the largest, device 3, holds 16.18 GiB (the whole fp32 model 16.00 GiB that it "
            "builds before moving its part to its GPU, the process 180.00 MiB); use fewer ranks "
            "per host, a smaller model or batch, or --no-memory-check");
}

TEST(MemoryCheck, TheHostSaysWhatItHasAvailable) {
  auto available = host_available_memory();
  ASSERT_TRUE(available);
  EXPECT_GT(available->value, 0);
}

}  // namespace
}  // namespace hetplan::runtime
