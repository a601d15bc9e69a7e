// Which precisions the runtime trains a plan in: fp32, tf32 and bf16 everywhere; fp16 on CUDA,
// stage plans and op-level plans alike (both scale the loss), which the planners' check says too.
#include <gtest/gtest.h>

#include "hetplan/model/zoo.h"
#include "hetplan/plan/plan_json.h"
#include "hetplan/runtime/runnable.h"

namespace hetplan::runtime {
namespace {

using model::DType;

TEST(PrecisionCheck, Fp16RunsOnCudaOnly) {
  for (bool cuda : {false, true}) {
    EXPECT_EQ(precision_problem(DType::fp32, cuda), "");
    EXPECT_EQ(precision_problem(DType::tf32, cuda), "");
    EXPECT_EQ(precision_problem(DType::bf16, cuda), "");
  }
  EXPECT_EQ(precision_problem(DType::fp16, true), "");
  EXPECT_EQ(precision_problem(DType::fp16, false),
            "precision fp16: runs with --device cuda only (the CPU's autocast has no fp16; bf16 "
            "is its CPU counterpart)");
  EXPECT_NE(precision_problem(DType::fp8, true), "");
}

TEST(PrecisionCheck, PlannersMayTrainOpByOpPlansInFp16) {
  // A VGG's classifier split over three devices runs op by op; a data-parallel MLP as a stage.
  auto vgg = model::load_model("vgg:depth=11,image=32,classes=10");
  auto mlp = model::load_model("mlp:layers=2,hidden=64,in=32,out=10");
  ASSERT_TRUE(vgg && mlp);
  auto split = plan::plan_from_json(nlohmann::json::parse(R"({"version": 1, "global_batch": 8,
    "num_microbatches": 2, "op_groups": [
      {"ops": ["block*", "fc6.*"], "mode": "replicate", "devices": [0, 1]},
      {"ops": ["fc7.*", "head.*"], "mode": "split", "devices": [2, 3, 4],
       "shares": [0.5, 0.3, 0.2]}]})"),
                                    "split");
  auto replicas = plan::plan_from_json(nlohmann::json::parse(R"({"version": 1, "global_batch": 8,
    "stages": [{"first_layer": 0, "num_layers": 3, "replicas": [
      {"devices": [0], "batch_share": 0.5}, {"devices": [1], "batch_share": 0.5}]}]})"),
                                       "replicas");
  ASSERT_TRUE(split && replicas);
  for (auto d : {DType::fp32, DType::bf16, DType::fp16}) {
    split->precision = replicas->precision = d;
    EXPECT_EQ(why_not_runnable(*mlp, *replicas), "") << model::to_string(d);
    EXPECT_EQ(why_not_runnable(*vgg, *split), "") << model::to_string(d);
  }
}

}  // namespace
}  // namespace hetplan::runtime
