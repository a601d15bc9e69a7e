// Plan export: golden files for Megatron-LM, DeepSpeed and torchrun on the zoo's models and the
// preset clusters, the Megatron-LM flags of a homogeneous plan read back as its grid, and what an
// engine cannot express listed rather than dropped.
#include "hetplan/plan/export.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "hetplan/cluster/cluster_file.h"
#include "hetplan/model/zoo.h"
#include "hetplan/plan/plan_json.h"
#include "hetplan/plan/strategy.h"
#include "hetplan/plan/validate.h"
#include "plan_fixtures.h"

namespace hetplan::plan {
namespace {

namespace fs = std::filesystem;

struct Case {
  Plan plan;
  model::Model model;
  cluster::Cluster cluster;
};

Case from_strategy(const std::string& model, const std::string& cluster,
                   const std::string& strategy) {
  auto m = model::load_model(model);
  auto c = cluster::load_cluster(cluster);
  auto s = parse_strategy(strategy);
  EXPECT_TRUE(m.ok() && c.ok() && s.ok());
  auto p = plan_from_strategy(*s, *m, *c, "test");
  EXPECT_TRUE(p.ok()) << p.error().message;
  return {*p, *m, *c};
}

Case from_example(const std::string& name) {
  auto p = read_plan_file((fs::path(HETPLAN_SOURCE_DIR) / "data" / "plans" / name).string());
  EXPECT_TRUE(p.ok()) << p.error().message;
  auto m = model::load_model(p->model);
  auto c = cluster::load_cluster(p->cluster);
  EXPECT_TRUE(m.ok() && c.ok());
  EXPECT_TRUE(validate_plan(*p, *m, *c, name).ok());
  return {*p, *m, *c};
}

Exported exported(Engine e, const Case& k) {
  ExportInputs in;
  in.model_spec = k.model.name;
  in.cluster_spec = k.plan.cluster;
  auto x = export_plan(e, k.plan, k.model, k.cluster, in);
  EXPECT_TRUE(x.ok()) << x.error().message;
  return x.ok() ? *x : Exported{};
}

const ExportedFile& file_named(const Exported& x, const std::string& name) {
  for (const auto& f : x.files)
    if (f.name == name) return f;
  ADD_FAILURE() << "no file " << name;
  static const ExportedFile none;
  return none;
}

// Compares the exported files (but `skip`) with tests/plan/data/export/<dir>/, or rewrites those
// with HETPLAN_UPDATE_GOLDEN=1.
void expect_golden(const Exported& x, const std::string& dir, const std::string& skip = "") {
  const fs::path golden = fs::path(HETPLAN_SOURCE_DIR) / "tests/plan/data/export" / dir;
  const bool update = std::getenv("HETPLAN_UPDATE_GOLDEN") != nullptr;
  if (update) fs::create_directories(golden);
  for (const auto& f : x.files) {
    if (f.name == skip) continue;
    if (update) {
      std::ofstream(golden / f.name) << f.text;
      continue;
    }
    std::ifstream in(golden / f.name);
    ASSERT_TRUE(in) << "no golden file " << (golden / f.name);
    std::stringstream want;
    want << in.rdbuf();
    EXPECT_EQ(f.text, want.str()) << dir << "/" << f.name
                                  << " differs (HETPLAN_UPDATE_GOLDEN=1 rewrites it)";
  }
}

int flag(const std::string& script, const std::string& name) {
  std::smatch m;
  const std::regex re(name + " (\\d+)");
  if (!std::regex_search(script, m, re)) return -1;
  return std::stoi(m[1]);
}

TEST(Export, MegatronFlagsOfAHomogeneousPlanAreItsGrid) {
  // gpt3-1.3b on 2 DGX A100 nodes: tp 2 x pp 2 x dp 4, micro-batches of 2, batch 512.
  const Case k = from_strategy("gpt3-1.3b", "dgx-a100:2",
                               "tp=2,pp=2,mbs=2,gbs=512,recompute=selective,zero=1,sp=1");
  const Exported x = exported(Engine::megatron, k);
  EXPECT_TRUE(x.differences.empty()) << x.differences.front();
  const std::string& s = file_named(x, "megatron.sh").text;
  const int tp = flag(s, "--tensor-model-parallel-size"),
            pp = flag(s, "--pipeline-model-parallel-size");
  EXPECT_EQ(tp, 2);
  EXPECT_EQ(pp, 2);
  EXPECT_EQ(flag(s, "--micro-batch-size"), 2);
  EXPECT_EQ(flag(s, "--global-batch-size"), 512);
  // Megatron-LM's dp is the world over tp x pp: the workers the script starts on its nodes.
  int world = 0;
  const std::regex nproc("NPROC=(\\d+)");
  for (std::sregex_iterator it(s.begin(), s.end(), nproc), end; it != end; ++it)
    world += std::stoi((*it)[1]);
  EXPECT_EQ(world, 16);
  EXPECT_EQ(world / (tp * pp), 4);
  EXPECT_EQ(flag(s, "--num-layers"), k.model.num_blocks);
  EXPECT_EQ(flag(s, "--hidden-size"), k.model.hidden);
  EXPECT_NE(s.find("--sequence-parallel"), std::string::npos);
  EXPECT_NE(s.find("--use-distributed-optimizer"), std::string::npos);
  EXPECT_NE(s.find("--recompute-granularity selective"), std::string::npos);
  expect_golden(x, "gpt3-1.3b-dgx-a100-2");
}

TEST(Export, DeepSpeedAndTorchrunOfAHomogeneousPlan) {
  const Case k = from_strategy("gpt3-1.3b", "dgx-a100:2",
                               "tp=2,pp=2,mbs=2,gbs=512,recompute=selective,zero=1,sp=1");
  const Exported ds = exported(Engine::deepspeed, k);
  const auto config = nlohmann::json::parse(file_named(ds, "ds_config.json").text);
  // train_batch_size = micro-batch x accumulation x dp, as DeepSpeed checks.
  EXPECT_EQ(config["train_batch_size"], 512);
  EXPECT_EQ(config["train_micro_batch_size_per_gpu"], 2);
  EXPECT_EQ(config["gradient_accumulation_steps"], 64);
  EXPECT_EQ(config["zero_optimization"]["stage"], 1);
  expect_golden(ds, "gpt3-1.3b-dgx-a100-2");
  const Exported tr = exported(Engine::torchrun, k);
  EXPECT_TRUE(tr.differences.empty());
  EXPECT_EQ(file_named(tr, "plan.json").text, to_json_text(k.plan));
  expect_golden(tr, "gpt3-1.3b-dgx-a100-2", "plan.json");
}

TEST(Export, FlashAttention) {
  const Case k =
      from_strategy("gpt3-1.3b", "dgx-a100:2", "tp=2,pp=2,mbs=2,gbs=512,attention=flash");
  const Exported x = exported(Engine::megatron, k);
  EXPECT_TRUE(x.differences.empty()) << x.differences.front();
  EXPECT_NE(file_named(x, "megatron.sh").text.find("  --use-flash-attn\n"), std::string::npos);
  const Exported ds = exported(Engine::deepspeed, k);
  ASSERT_FALSE(ds.differences.empty());
  EXPECT_EQ(ds.differences.front().rfind("attention flash: DeepSpeed's config has no attention "
                                         "setting",
                                         0),
            0u)
      << ds.differences.front();
  // The first FlashAttention's kernels: Megatron-LM runs FlashAttention-2 in their place, and says
  // it is faster than planned.
  const Case k1 =
      from_strategy("gpt3-1.3b", "dgx-a100:2", "tp=2,pp=2,mbs=2,gbs=512,attention=flash1");
  const Exported x1 = exported(Engine::megatron, k1);
  EXPECT_NE(file_named(x1, "megatron.sh").text.find("  --use-flash-attn\n"), std::string::npos);
  ASSERT_EQ(x1.differences.size(), 1u) << x1.differences.back();
  EXPECT_EQ(x1.differences.front().rfind("attention flash1: Megatron-LM's --use-flash-attn runs "
                                         "FlashAttention-2",
                                         0),
            0u)
      << x1.differences.front();
}

// Training metrics (Composer's): neither engine computes them, and both exports say so.
TEST(Export, TrainingMetricsAreSaidToBeLeftOut) {
  const Case k = from_strategy("gpt3-1.3b", "dgx-a100:2", "tp=2,pp=2,mbs=2,gbs=512,metrics=2");
  for (Engine e : {Engine::megatron, Engine::deepspeed}) {
    const Exported x = exported(e, k);
    EXPECT_TRUE(std::any_of(x.differences.begin(), x.differences.end(), [](const std::string& d) {
      return d.rfind("metrics 2: ", 0) == 0 && d.find("computes no training metrics") != d.npos;
    })) << (x.differences.empty() ? std::string("none") : x.differences.front());
  }
}

TEST(Export, OverlappedCollectives) {
  // Megatron-LM overlaps both when asked (tensor-parallel collectives only under sequence
  // parallelism); DeepSpeed and hetplan's runtime run them synchronously and say so.
  const Case k = from_strategy("gpt3-1.3b", "dgx-a100:2",
                               "tp=2,pp=2,mbs=2,gbs=512,sp=1,zero=1,overlap=tp+param");
  const Exported x = exported(Engine::megatron, k);
  EXPECT_TRUE(x.differences.empty()) << x.differences.front();
  const std::string& s = file_named(x, "megatron.sh").text;
  EXPECT_NE(s.find("  --tp-comm-overlap\n"), std::string::npos) << s;
  EXPECT_NE(s.find("  --overlap-grad-reduce --overlap-param-gather\n"), std::string::npos) << s;
  for (Engine e : {Engine::deepspeed, Engine::torchrun}) {
    const Exported other = exported(e, k);
    EXPECT_EQ(
        std::count_if(other.differences.begin(), other.differences.end(),
                      [](const std::string& d) { return d.rfind("overlap tp+param: ", 0) == 0; }),
        1);
  }
  const Case no_sp = from_strategy("gpt3-1.3b", "dgx-a100:2", "tp=2,pp=2,mbs=2,gbs=512,overlap=tp");
  const Exported y = exported(Engine::megatron, no_sp);
  EXPECT_EQ(file_named(y, "megatron.sh").text.find("  --tp-comm-overlap\n"), std::string::npos);
  ASSERT_EQ(y.differences.size(), 1u);
  EXPECT_EQ(y.differences.front().rfind("overlap tp: Megatron-LM overlaps tensor-parallel", 0), 0u)
      << y.differences.front();
}

TEST(Export, AnUnfusedAdamStepIsListedForEnginesThatFuseIt) {
  // Megatron-LM and DeepSpeed step Adam with fused kernels: a plan priced with PyTorch's loop says
  // its steps would take less there. Fused plans list nothing.
  const Case looped =
      from_strategy("gpt3-1.3b", "dgx-a100:2", "tp=2,pp=2,mbs=2,gbs=512,adam=per-tensor");
  const Case fused = from_strategy("gpt3-1.3b", "dgx-a100:2", "tp=2,pp=2,mbs=2,gbs=512");
  for (Engine e : {Engine::megatron, Engine::deepspeed}) {
    const Exported x = exported(e, looped);
    EXPECT_EQ(
        std::count_if(x.differences.begin(), x.differences.end(),
                      [](const std::string& d) { return d.rfind("adam per-tensor: ", 0) == 0; }),
        1);
    const Exported y = exported(e, fused);
    EXPECT_EQ(std::count_if(y.differences.begin(), y.differences.end(),
                            [](const std::string& d) { return d.rfind("adam ", 0) == 0; }),
              0);
  }
}

TEST(Export, Tf32IsWrittenAsFp32WithTheDifferenceSaid) {
  // Neither engine turns on TF32 matmuls: the job trains fp32, which the list says.
  const Case k = from_strategy("gpt:layers=2,hidden=256,heads=4,seq=128,vocab=1000,dtype=tf32",
                               "dgx-a100:1", "dp=8,gbs=64");
  for (Engine e : {Engine::megatron, Engine::deepspeed}) {
    const Exported x = exported(e, k);
    EXPECT_EQ(
        std::count_if(x.differences.begin(), x.differences.end(),
                      [](const std::string& d) { return d.rfind("precision tf32: ", 0) == 0; }),
        1);
  }
  EXPECT_EQ(file_named(exported(Engine::megatron, k), "megatron.sh").text.find("--bf16"),
            std::string::npos);
}

TEST(Export, AFusedLossIsMegatronCoresFusion) {
  const Case k = from_strategy("gpt3-1.3b", "dgx-a100:2", "tp=2,pp=2,mbs=2,gbs=512,loss=fused");
  EXPECT_NE(file_named(exported(Engine::megatron, k), "megatron.sh")
                .text.find("--cross-entropy-loss-fusion"),
            std::string::npos);
  const Case u = from_strategy("gpt3-1.3b", "dgx-a100:2", "tp=2,pp=2,mbs=2,gbs=512");
  EXPECT_EQ(file_named(exported(Engine::megatron, u), "megatron.sh")
                .text.find("--cross-entropy-loss-fusion"),
            std::string::npos);
}

TEST(Export, WhatAnEngineCannotExpressIsListed) {
  // The hand-written heterogeneous plan: 7 and 5 blocks per stage, uneven batch shares in stage
  // 1, the embedding's gradients through a parameter server, norms replicated by override.
  const Case k = from_example("gpt3-125m-heterog-2stage.json");
  const Exported x = exported(Engine::megatron, k);
  const std::string& s = file_named(x, "megatron.sh").text;
  // Two stages: the first's count fixes the last's (Megatron-core 0.11 and 0.12 divide by zero
  // when both are given).
  EXPECT_NE(s.find("--decoder-first-pipeline-num-layers 7\n"), std::string::npos) << s;
  EXPECT_EQ(s.find("--decoder-last-pipeline-num-layers"), std::string::npos) << s;
  auto listed = [&](const Exported& e, const std::string& text) {
    for (const auto& d : e.differences)
      if (d.find(text) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(listed(x, "stage 1 gives its replicas uneven batch shares (0.375/0.625)"));
  EXPECT_TRUE(listed(x, "the gradients of embedding.* synchronise by parameter_server"));
  EXPECT_TRUE(listed(x, "the ops layers.*.norm* are split by replicate"));
  // The V100s, the 1080 Tis and the P100s have no BF16: Megatron-LM is written for fp16.
  EXPECT_TRUE(listed(x,
                     "bf16: V100-PCIE-16GB (Volta), GTX-1080Ti (Pascal), P100-PCIE-16GB "
                     "(Pascal) have no BF16 arithmetic; Megatron-LM is written for fp16"));
  EXPECT_NE(s.find("  --fp16\n"), std::string::npos) << s;
  EXPECT_EQ(s.find("--bf16"), std::string::npos) << s;
  EXPECT_EQ(x.differences.size(), 4u);
  expect_golden(x, "gpt3-125m-heterog-2stage");
  const Exported ds = exported(Engine::deepspeed, k);
  EXPECT_TRUE(listed(ds, "the stages hold 7, 5 blocks"));
  EXPECT_TRUE(listed(ds, "recompute selective"));
  const auto ds_config = nlohmann::json::parse(file_named(ds, "ds_config.json").text);
  EXPECT_EQ(ds_config["fp16"]["enabled"], true);
  EXPECT_FALSE(ds_config.contains("bf16"));
  // hetplan's own runtime trains these GPUs in fp16 under loss scaling; a plan that names its
  // precision carries the one written instead of the flag.
  const Exported tr = exported(Engine::torchrun, k);
  EXPECT_TRUE(listed(tr,
                     "the model computes in bf16: V100-PCIE-16GB (Volta), GTX-1080Ti "
                     "(Pascal), P100-PCIE-16GB (Pascal) have no BF16 arithmetic; written: fp16 "
                     "(under dynamic loss scaling)"));
  EXPECT_NE(file_named(tr, "torchrun.sh").text.find(" --precision fp16 "), std::string::npos);
  Case named = k;
  named.plan.precision = model::DType::bf16;
  const Exported carried = exported(Engine::torchrun, named);
  EXPECT_EQ(file_named(carried, "torchrun.sh").text.find("--precision"), std::string::npos);
  EXPECT_NE(file_named(carried, "plan.json").text.find("\"precision\": \"fp16\""),
            std::string::npos);
  expect_golden(ds, "gpt3-125m-heterog-2stage");
}

TEST(Export, MegatronInterleavedScheduleAndUnlikeDegrees) {
  const Case k = from_example("gpt3-125m-dgx-a100-interleaved.json");
  const Exported x = exported(Engine::megatron, k);
  const std::string& s = file_named(x, "megatron.sh").text;
  EXPECT_GT(flag(s, "--num-layers-per-virtual-pipeline-stage"), 0) << s;
  expect_golden(x, "gpt3-125m-dgx-a100-interleaved");

  // Unlike tensor-parallel degrees: the most common is kept, and the difference said.
  Case two{testing::two_stage_plan(), testing::tiny_gpt(4), testing::tiny_cluster(8)};
  two.plan.stages[1].replicas = {Replica{{4, 5}, {}, 0.5}, Replica{{6}, {}, 0.25},
                                 Replica{{7}, {}, 0.25}};
  two.model.family = model::Family::decoder_lm;
  const Exported y = exported(Engine::megatron, two);
  const std::string& t = file_named(y, "megatron.sh").text;
  EXPECT_EQ(flag(t, "--tensor-model-parallel-size"), 2);
  EXPECT_EQ(flag(t, "--pipeline-model-parallel-size"), 2);
  bool said = false;
  for (const auto& d : y.differences)
    said = said || d.find("tp 1 on 2 replica(s), tp 2 on 3 replica(s)") != std::string::npos;
  EXPECT_TRUE(said) << (y.differences.empty() ? "" : y.differences.front());
}

// Megatron-core's stage counts: the middle stages equal, the first and the last written only
// where they differ, and each at least one block; tensor shares judged per replica and batch
// shares over all of a stage's replicas.
TEST(Export, MegatronStageCountsAndShares) {
  auto blocks_flags = [](std::vector<Stage> stages) {
    Case k{Plan{}, testing::tiny_gpt(4), testing::tiny_cluster(3)};
    k.plan.global_batch = 6;
    k.plan.num_microbatches = 3;
    k.plan.stages = std::move(stages);
    return exported(Engine::megatron, k);
  };
  auto one = [](int device) { return std::vector<Replica>{Replica{{device}, {}, 1.0}}; };
  // Layers: embedding, layers.0 .. layers.3, head. Blocks per stage 1, 2, 1.
  Exported x = blocks_flags({Stage{0, 2, one(0)}, Stage{2, 2, one(1)}, Stage{4, 2, one(2)}});
  std::string s = x.files.front().text;
  EXPECT_NE(s.find("--decoder-first-pipeline-num-layers 1\n"), std::string::npos) << s;
  EXPECT_NE(s.find("--decoder-last-pipeline-num-layers 1\n"), std::string::npos) << s;
  // 2, 1, 1: only the first differs from the middle.
  x = blocks_flags({Stage{0, 3, one(0)}, Stage{3, 1, one(1)}, Stage{4, 2, one(2)}});
  s = x.files.front().text;
  EXPECT_NE(s.find("--decoder-first-pipeline-num-layers 2\n"), std::string::npos) << s;
  EXPECT_EQ(s.find("--decoder-last-pipeline-num-layers"), std::string::npos) << s;
  // 0, 2, 2: an embedding-only stage has no Megatron-LM form.
  x = blocks_flags({Stage{0, 1, one(0)}, Stage{1, 2, one(1)}, Stage{3, 3, one(2)}});
  s = x.files.front().text;
  EXPECT_EQ(s.find("pipeline-num-layers"), std::string::npos) << s;
  ASSERT_EQ(x.differences.size(), 1u);
  EXPECT_NE(x.differences.front().find("the stages hold 0, 2, 2 blocks"), std::string::npos);

  // Four even replicas, one with uneven tensor shares: said once, and no batch difference.
  Case k{Plan{}, testing::tiny_gpt(2), testing::tiny_cluster(8)};
  k.plan.global_batch = 8;
  k.plan.num_microbatches = 2;
  k.plan.stages = {Stage{0,
                         4,
                         {Replica{{0, 1}, {}, 0.25}, Replica{{2, 3}, {0.7, 0.3}, 0.25},
                          Replica{{4, 5}, {}, 0.25}, Replica{{6, 7}, {}, 0.25}}}};
  x = exported(Engine::megatron, k);
  ASSERT_EQ(x.differences.size(), 1u) << x.differences.back();
  EXPECT_NE(
      x.differences.front().find("stage 0 splits tensors unevenly (0.7/0.3 over devices 2, 3)"),
      std::string::npos)
      << x.differences.front();
}

TEST(Export, ForeignNodeOrderAndEngineRefusals) {
  // A stage whose tensor-parallel pair spans two nodes: Megatron-LM's ranks (tp fastest) would
  // put a node's devices in non-consecutive ranks, which no launcher numbers so.
  Case k{Plan{}, testing::tiny_gpt(2), testing::tiny_cluster(4, 2)};
  k.plan.global_batch = 8;
  k.plan.num_microbatches = 2;
  k.plan.stages = {Stage{0, 2, {Replica{{0, 2}, {}, 1.0}}},
                   Stage{2, 2, {Replica{{1, 3}, {}, 1.0}}}};
  const Exported x = exported(Engine::megatron, k);
  bool said = false;
  for (const auto& d : x.differences) said = said || d.find("non-consecutive") != std::string::npos;
  EXPECT_TRUE(said);
  // torchrun numbers the plan's devices node by node; hetplan run maps them (--ranks-by-device).
  EXPECT_EQ(devices_node_by_node(k.plan, k.cluster), (std::vector<int>{0, 1, 2, 3}));
  const Exported tr = exported(Engine::torchrun, k);
  const std::string& s = file_named(tr, "torchrun.sh").text;
  EXPECT_NE(s.find("0) NPROC=2; export CUDA_VISIBLE_DEVICES=0,1"), std::string::npos) << s;
  EXPECT_NE(s.find("--ranks-by-device"), std::string::npos);

  ExportInputs in;
  auto cnn = export_plan(Engine::megatron, testing::two_stage_plan(), testing::tiny_cnn(6),
                         testing::tiny_cluster(8), in);
  ASSERT_FALSE(cnn.ok());
  EXPECT_NE(cnn.error().message.find("--to megatron: Megatron-LM trains transformers"),
            std::string::npos);
  Plan op_level;
  OpGroup all;
  all.ops = {"*"};
  all.devices = {0, 1};
  op_level.op_groups = {all};
  auto ops =
      export_plan(Engine::deepspeed, op_level, testing::tiny_gpt(2), testing::tiny_cluster(2), in);
  ASSERT_FALSE(ops.ok());
  EXPECT_NE(ops.error().message.find("an op-level plan"), std::string::npos);
  EXPECT_EQ(engine_from_string("torchrun"), Engine::torchrun);
  EXPECT_FALSE(engine_from_string("horovod"));
}

TEST(Export, ShellQuotingOfSpecs) {
  Case k{Plan{}, testing::tiny_gpt(2), testing::tiny_cluster(2)};
  k.plan.global_batch = 4;
  k.plan.stages = {Stage{0, 4, {Replica{{0, 1}, {}, 1.0}}}};
  ExportInputs in;
  in.model_spec = "it's.json";
  in.cluster_spec = "c.yaml";
  auto x = export_plan(Engine::torchrun, k.plan, k.model, k.cluster, in);
  ASSERT_TRUE(x.ok());
  EXPECT_NE(x->files.front().text.find("--model 'it'\\''s.json' --cluster 'c.yaml'"),
            std::string::npos)
      << x->files.front().text;
}

}  // namespace
}  // namespace hetplan::plan
