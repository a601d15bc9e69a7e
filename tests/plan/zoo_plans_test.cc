// The plan layer on the real zoo models and cluster presets: the example plans validate, and the
// shorthand lays out the Megatron-LM runs of the published table.
#include <gtest/gtest.h>

#include <filesystem>

#include "hetplan/cluster/cluster_file.h"
#include "hetplan/model/zoo.h"
#include "hetplan/plan/plan_json.h"
#include "hetplan/plan/strategy.h"
#include "hetplan/plan/validate.h"

namespace hetplan::plan {
namespace {

std::string example(const std::string& name) {
  return (std::filesystem::path(HETPLAN_SOURCE_DIR) / "data" / "plans" / name).string();
}

void expect_example_valid(const std::string& name) {
  auto p = read_plan_file(example(name));
  ASSERT_TRUE(p.ok()) << p.error().message;
  auto m = model::load_model(p->model);
  ASSERT_TRUE(m.ok()) << m.error().message;
  auto c = cluster::load_cluster(p->cluster);
  ASSERT_TRUE(c.ok()) << c.error().message;
  auto v = validate_plan(*p, *m, *c, name);
  EXPECT_TRUE(v.ok()) << v.error().message;
}

TEST(ZooPlans, ExamplesValidate) {
  expect_example_valid("gpt3-125m-heterog-2stage.json");
  expect_example_valid("gpt3-125m-dgx-a100-interleaved.json");
}

TEST(ZooPlans, Gpt3On1536A100s) {
  auto m = model::load_model("gpt3-175b");
  ASSERT_TRUE(m.ok()) << m.error().message;
  auto c = cluster::load_cluster("dgx-a100:192");
  ASSERT_TRUE(c.ok()) << c.error().message;
  auto s = parse_strategy("tp=8,pp=8,dp=24,gbs=2304");
  ASSERT_TRUE(s.ok());
  auto p = plan_from_strategy(*s, *m, *c);
  ASSERT_TRUE(p.ok()) << p.error().message;
  ASSERT_EQ(p->stages.size(), 8u);
  EXPECT_EQ(p->num_microbatches, 96);
  EXPECT_EQ(p->stages[0].first_layer, 0);
  EXPECT_EQ(p->stages[0].num_layers, 13);  // embedding + 12 blocks
  EXPECT_EQ(p->stages[7].num_layers, 13);  // 12 blocks + head
  EXPECT_EQ(p->stages[7].replicas[23].devices.back(), 1535);
  auto v = validate_plan(*p, *m, *c, "--strategy");
  EXPECT_TRUE(v.ok()) << v.error().message;
}

TEST(ZooPlans, ShorthandErrorsOnRealModels) {
  auto m = model::load_model("llama2-70b");  // 64 heads, 8 kv heads
  ASSERT_TRUE(m.ok()) << m.error().message;
  auto c = cluster::load_cluster("dgx-a100:2");
  ASSERT_TRUE(c.ok()) << c.error().message;
  auto p = plan_from_strategy(*parse_strategy("tp=16"), *m, *c);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().message,
            "--strategy: tp=16: expected a divisor of the number of key/value heads (8)");
}

}  // namespace
}  // namespace hetplan::plan
