// StageMemoryTable against stage_memory over every layer range, and RangeMax against a scan.
#include "hetplan/cost/memory_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "hetplan/model/zoo.h"

namespace hetplan::cost {
namespace {

TEST(RangeMax, EveryRangeIsTheLargestOfItsValues) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0, 100);
  for (int n : {0, 1, 2, 3, 5, 8, 13, 64, 100}) {
    std::vector<double> v(static_cast<std::size_t>(n));
    for (double& x : v) x = u(rng);
    const RangeMax rm(v);
    for (int a = 0; a <= n; ++a)
      for (int b = a; b <= n; ++b) {
        const double want = a == b ? 0 : *std::max_element(v.begin() + a, v.begin() + b);
        ASSERT_EQ(rm.of(a, b), want) << n << " [" << a << ", " << b << ")";
      }
  }
}

void expect_near_rel(double got, double want, const std::string& what) {
  EXPECT_NEAR(got, want, 1e-12 * std::max(1.0, std::abs(want))) << what;
}

void expect_table_matches(const model::Model& m, const MemoryConfig& cfg,
                          const std::vector<Bytes>& gathered, const std::string& name) {
  const StageMemoryTable t(m, cfg, gathered);
  const int L = static_cast<int>(m.layers.size());
  ASSERT_EQ(t.layers(), L);
  for (int a = 0; a <= L; ++a)
    for (int b = a; b <= L; ++b) {
      MemoryConfig c = cfg;
      c.first_layer = a;
      c.num_layers = b - a;
      for (int l = a; l < b && !gathered.empty(); ++l)
        c.gathered_weights = max(c.gathered_weights, gathered[l]);
      const MemoryBreakdown want = stage_memory(m, c), got = t.at(a, b - a);
      const std::string where = name + " [" + std::to_string(a) + ", " + std::to_string(b) + ")";
      expect_near_rel(got.parameters.value, want.parameters.value, where + " parameters");
      expect_near_rel(got.gradients.value, want.gradients.value, where + " gradients");
      expect_near_rel(got.optimizer.value, want.optimizer.value, where + " optimizer");
      expect_near_rel(got.activations.value, want.activations.value, where + " activations");
      expect_near_rel(got.buffers.value, want.buffers.value, where + " buffers");
      expect_near_rel(got.total().value, want.total().value, where + " total");
      if (::testing::Test::HasFailure()) return;
    }
}

// Every setting the memory model distinguishes, over a tied language model (its head away from
// the table holds a copy), an untied one, a CNN and a mixture of experts.
TEST(StageMemoryTable, EqualsStageMemoryOverEveryRange) {
  for (const char* name : {"gpt:layers=6,hidden=256,heads=8,seq=128,vocab=1000",
                           "llama:layers=4,hidden=256,heads=8,seq=128,vocab=1000", "resnet50",
                           "moe:layers=3,hidden=128,heads=4,seq=64,vocab=500,experts=4"}) {
    const auto m = model::load_model(name);
    ASSERT_TRUE(m.ok()) << name << ": " << m.error().message;
    int variant = 0;
    for (auto rc : {Recompute::none, Recompute::selective, Recompute::full})
      for (auto att : {Attention::plain, Attention::flash, Attention::flash1})
        for (int zero : {0, 1, 3}) {
          MemoryConfig cfg;
          cfg.recompute = rc;
          cfg.attention = att;
          cfg.zero_stage = zero;
          cfg.zero_group = 4;
          cfg.param_shard = cfg.activation_shard = variant % 2 ? 0.25 : 0.6;
          cfg.tensor_parallel = 2;
          cfg.sequence_parallel = variant % 3 == 0;
          cfg.micro_batch = 3;
          cfg.inflight_microbatches = 1 + variant % 4;
          cfg.fragmentation = 0.1;
          std::vector<Bytes> gathered;
          if (variant % 2) {  // ops split other than by their kind: some whole, some gathered
            cfg.whole_params.resize(m->ops.size());
            cfg.whole_activations.resize(m->ops.size());
            for (std::size_t i = 0; i < m->ops.size(); ++i) {
              cfg.whole_params[i] = i % 3 == 0;
              cfg.whole_activations[i] = i % 5 == 0;
            }
            for (std::size_t l = 0; l < m->layers.size(); ++l)
              gathered.push_back(Bytes(1000.0 * static_cast<double>((l * 7) % 11)));
          }
          expect_table_matches(*m, cfg, gathered,
                               std::string(name) + " variant " + std::to_string(variant));
          ++variant;
          if (::testing::Test::HasFailure()) return;
        }
  }
}

}  // namespace
}  // namespace hetplan::cost
