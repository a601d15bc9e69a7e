// The cost layer on the real model zoo and cluster presets: the summation rules agree with the
// standard formulas on the GPT block the model layer builds, and collectives stay fast at scale.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <numeric>
#include <random>

#include "../../src/cost/collective_internal.h"
#include "hetplan/cluster/cluster_file.h"
#include "hetplan/cost/collective_cost.h"
#include "hetplan/cost/memory_cost.h"
#include "hetplan/model/zoo.h"

namespace hetplan::cost {
namespace {

int first_transformer_layer(const model::Model& m) {
  for (std::size_t i = 0; i < m.layers.size(); ++i)
    if (m.layers[i].kind == model::LayerKind::transformer) return static_cast<int>(i);
  return -1;
}

TEST(CostOnZoo, GptBlockActivationsFollowKorthikanti) {
  auto m = model::load_model("gpt:layers=4,hidden=1024,heads=16,seq=1024,vocab=51200");
  ASSERT_TRUE(m.ok()) << m.error().message;
  const double s = 1024, h = 1024, a = 16, b = 2, t = 4, L = 4;
  MemoryConfig cfg;
  cfg.first_layer = first_transformer_layer(*m);
  cfg.num_layers = 4;
  cfg.micro_batch = b;
  EXPECT_DOUBLE_EQ(stage_memory(*m, cfg).activations.value, L * s * b * h * (34 + 5 * a * s / h));
  cfg.activation_shard = 1 / t;
  cfg.tensor_parallel = 4;
  EXPECT_DOUBLE_EQ(stage_memory(*m, cfg).activations.value,
                   L * s * b * h * (10 + 24 / t + 5 * a * s / (h * t)));
  cfg.sequence_parallel = true;
  cfg.recompute = Recompute::selective;
  EXPECT_DOUBLE_EQ(stage_memory(*m, cfg).activations.value, L * s * b * h * 34 / t);
  cfg.recompute = Recompute::full;
  EXPECT_DOUBLE_EQ(stage_activation_bytes(*m, cfg).stored_per_sample, L * 2 * s * h / t);
}

TEST(CostOnZoo, EighteenBytesPerParameterForAWholeBf16Model) {
  auto m = model::load_model("gpt3-1.3b");
  ASSERT_TRUE(m.ok()) << m.error().message;
  MemoryConfig cfg;
  cfg.num_layers = static_cast<int>(m->layers.size());
  const auto mem = stage_memory(*m, cfg);
  EXPECT_DOUBLE_EQ((mem.parameters + mem.gradients + mem.optimizer).value,
                   18.0 * static_cast<double>(m->parameters()));
}

TEST(CostOnZoo, DataParallelAllReduceOnAPodOf4096Gpus) {
  auto c = cluster::load_cluster("dgx-a100:512");
  ASSERT_TRUE(c.ok()) << c.error().message;
  std::vector<int> all(c->num_devices());
  std::iota(all.begin(), all.end(), 0);
  CollectiveRequest req;
  req.devices = all;
  req.bytes = Bytes(2.6e9);  // bf16 gradients of a 1.3B model
  const auto start = std::chrono::steady_clock::now();
  const auto cost = collective_cost(*c, req, NetworkParams::defaults());
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(elapsed, 0.5);  // ring, tree and hierarchical candidates over 4096 devices
  // Bus bandwidth bound: 2(n-1)/n S over 8 rails of 200 Gb/s at 90%, or NVSwitch at 65% of 300
  // GB/s.
  const double n = 4096;
  const double rail_bound = 2 * (n - 1) / n * 2.6e9 / (8 * 25e9 * 0.9);
  EXPECT_GT(cost.time.value, rail_bound * 0.99);
  // The rest is latency: 2(n-1)/n passes round 512 nodes x (7 NVSwitch hops of 2 us + 1 of 5 us).
  EXPECT_LT(cost.time.value, rail_bound + 2 * 512 * (7 * 2e-6 + 5e-6) + 0.01);
  // Rail-aligned data-parallel groups (one GPU per node, tp = 8) cross only their own rail.
  std::vector<int> rail;
  for (int node = 0; node < 512; ++node) rail.push_back(node * 8 + 3);
  req.devices = rail;
  const auto r = collective_cost(*c, req, NetworkParams::defaults());
  // The double binary tree: the ring's bandwidth term without its 2 x 511 hop latencies.
  EXPECT_EQ(r.algorithm, Algorithm::tree);
  req.algorithm = Algorithm::ring;
  const auto ring = collective_cost(*c, req, NetworkParams::defaults());
  EXPECT_LT(r.time.value, ring.time.value);
  EXPECT_NEAR(ring.time.value, 2 * 511.0 / 512 * 2.6e9 / (25e9 * 0.9), 0.2 * ring.time.value);
  EXPECT_NEAR(r.time.value, 2 * 511.0 / 512 * 2.6e9 / (25e9 * 0.9), 0.2 * r.time.value);
  // Over rail 3 only: each GPU's links to and from its NIC 3, and those NICs' to the network.
  EXPECT_EQ(r.loads.size(), 512u * 4);
  for (const auto& l : r.loads) {
    const auto& name = c->links[l.link].name;
    EXPECT_NE(name.find("nic3"), std::string::npos) << name;
  }
}

// A phase's loads, summed by link in a table as long as the cluster's links, are what summing
// every hop's route link by link gives (the reference below): read out through every link when
// many are touched and through the touched ones sorted when few are, with ECMP hashing and
// spraying over a leaf-spine network's equal routes.
TEST(CostOnZoo, PhaseLoadsAreEveryHopsRouteSummedByLink) {
  for (const char* name : {"mixed-512", "leaf-spine-mixed", "dgx-a100:4"}) {
    auto c = cluster::load_cluster(name);
    ASSERT_TRUE(c.ok()) << c.error().message;
    std::mt19937 rng(7);
    std::uniform_int_distribution<int> device(0, c->num_devices() - 1);
    std::uniform_real_distribution<double> bytes(1, 1e6);
    for (bool spray : {false, true}) {
      NetworkParams p = NetworkParams::defaults();
      p.spray = spray;
      for (int hops : {1, 3, 2 * c->num_devices()}) {
        std::vector<detail::Hop> h;
        for (int k = 0; k < hops; ++k) h.push_back({device(rng), device(rng), bytes(rng), 1});
        std::map<int, double> want;
        double want_total = 0;  // equal routes are as long as one another
        for (const auto& hop : h) {
          if (hop.src == hop.dst) continue;
          want_total += hop.bytes * static_cast<double>(c->route(hop.src, hop.dst).size());
          const int paths = c->multipath() ? c->num_equal_routes(hop.src, hop.dst) : 1;
          if (paths > 1 && spray) {
            for (int k = 0; k < paths; ++k)
              for (int l : c->equal_route(hop.src, hop.dst, k)) want[l] += hop.bytes / paths;
          } else if (paths > 1) {
            continue;  // ECMP: whichever equal route the hash picks (checked by the total)
          } else {
            for (int l : c->route(hop.src, hop.dst)) want[l] += hop.bytes;
          }
        }
        const auto e = detail::phase(*c, p, h, 0);
        const bool ecmp = c->multipath() && !spray;
        if (!ecmp) {
          ASSERT_EQ(e.loads.size(), want.size()) << name << " " << hops << " hops";
          auto it = want.begin();
          for (const auto& l : e.loads) {
            EXPECT_EQ(l.link, it->first) << name;
            EXPECT_NEAR(l.bytes, it->second, 1e-9 * it->second) << name;
            ++it;
          }
        }
        double total = 0;
        for (const auto& l : e.loads) total += l.bytes;
        EXPECT_NEAR(total, want_total, 1e-9 * want_total) << name;
        for (std::size_t i = 1; i < e.loads.size(); ++i)
          EXPECT_LT(e.loads[i - 1].link, e.loads[i].link) << name;
        // A second phase on the same thread starts from a clean table.
        const auto again = detail::phase(*c, p, h, 0);
        ASSERT_EQ(again.loads.size(), e.loads.size());
        for (std::size_t i = 0; i < e.loads.size(); ++i)
          EXPECT_EQ(again.loads[i].bytes, e.loads[i].bytes);
      }
    }
  }
}

}  // namespace
}  // namespace hetplan::cost
