// The memory pre-check's estimate: the whole fp32 model on every rank, each rank's part of the
// gradients, Adam's moments and activations from the simulator, carried over to fp32.
#include "hetplan/runtime/memory_check.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "hetplan/cluster/cluster_file.h"
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

TEST(MemoryCheck, EachRankHoldsTheWholeModelAndItsPart) {
  const Need need = two_stage_mlp("fp32");
  ASSERT_EQ(need.ranks.size(), 2u);
  const double whole = 4.0 * need.params;
  double grads = 0;
  for (const RankMemory& r : need.ranks) {
    EXPECT_DOUBLE_EQ(r.whole_model.value, whole);
    // fp32: 4-byte gradients and 8 bytes of Adam moments per parameter of its stage.
    EXPECT_DOUBLE_EQ(r.optimizer.value, 2 * r.gradients.value);
    EXPECT_GT(r.activations.value, 0);
    grads += r.gradients.value;
  }
  EXPECT_DOUBLE_EQ(grads, whole);  // the two stages' parameters are the model's
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
    double grads = 0;
    for (const RankMemory& r : need.ranks) {
      EXPECT_DOUBLE_EQ(r.optimizer.value, 2 * r.gradients.value) << dtype;
      grads += r.gradients.value;
    }
    EXPECT_DOUBLE_EQ(grads, 4.0 * need.params) << dtype;
  }
}

// Under ZeRO-2 and -3 the runtime holds a replica's whole gradients through the backward passes
// and reduce-scatters a flat copy of them after: not the simulator's slice.
TEST(MemoryCheck, ZeroTwoAndThreeHoldTheWholeGradientsUntilTheReduceScatter) {
  auto m = model::load_model("mlp:layers=4,hidden=64,in=32,out=10");
  auto c = cluster::load_cluster("cpu:2", "--cluster");
  ASSERT_TRUE(m && c);
  const double whole = 4.0 * static_cast<double>(m->parameters());
  for (const char* strategy : {"dp=2,gbs=8,zero=2", "dp=2,gbs=8,zero=3"}) {
    auto s = plan::parse_strategy(strategy);
    ASSERT_TRUE(s);
    auto p = plan::plan_from_strategy(*s, *m, *c);
    ASSERT_TRUE(p) << p.error().message;
    auto need = rank_memory(*m, *c, *p);
    ASSERT_TRUE(need) << need.error().message;
    ASSERT_EQ(need->size(), 2u);
    for (const RankMemory& r : *need) {
      EXPECT_DOUBLE_EQ(r.gradients.value, whole) << strategy;
      // Adam's moments are sliced: 8 bytes for each of half the parameters.
      EXPECT_DOUBLE_EQ(r.optimizer.value, whole) << strategy;
      EXPECT_DOUBLE_EQ(r.flat_gradients.value, std::max(0.0, whole - r.activations.value))
          << strategy;
      EXPECT_GT(r.flat_gradients.value, 0) << strategy;  // this MLP's activations are small
    }
  }
}

TEST(MemoryCheck, TheHostSaysWhatItHasAvailable) {
  auto available = host_available_memory();
  ASSERT_TRUE(available);
  EXPECT_GT(available->value, 0);
}

}  // namespace
}  // namespace hetplan::runtime
