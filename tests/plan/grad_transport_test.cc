// DLCP's settings (plan.h's GradPriority, loss_bound, Multipath): plan files, the strategy
// shorthand and validation, each bad value with one exact message.
#include <gtest/gtest.h>

#include "hetplan/plan/plan_json.h"
#include "hetplan/plan/strategy.h"
#include "hetplan/plan/validate.h"
#include "plan_fixtures.h"

namespace hetplan::plan {
namespace {

using testing::tiny_cluster;
using testing::tiny_gpt;
using testing::two_stage_plan;

Plan dlcp_plan() {
  Plan p = two_stage_plan();
  p.grad_priority = GradPriority::layer_magnitude;
  p.loss_bound = 0.05;
  p.multipath = Multipath::spray;
  return p;
}

TEST(GradTransport, NamesRoundTrip) {
  for (GradPriority g : {GradPriority::none, GradPriority::layer, GradPriority::layer_magnitude})
    EXPECT_EQ(grad_priority_from_string(to_string(g)), g);
  for (Multipath m : {Multipath::ecmp, Multipath::spray})
    EXPECT_EQ(multipath_from_string(to_string(m)), m);
  EXPECT_EQ(grad_priority_names(), "none|layer|layer+magnitude");
  EXPECT_EQ(multipath_names(), "ecmp|spray");
}

TEST(GradTransport, PlanFileRoundTripsAndDefaultsStayOut) {
  const Plan p = dlcp_plan();
  const nlohmann::json j = to_json(p);
  EXPECT_EQ(j.at("grad_priority"), "layer+magnitude");
  EXPECT_EQ(j.at("loss_bound"), 0.05);
  EXPECT_EQ(j.at("multipath"), "spray");
  auto back = plan_from_json(j, "mem");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, p);
  // A plan that leaves them at their defaults writes none of them (its file is unchanged).
  const nlohmann::json plain = to_json(two_stage_plan());
  for (const char* key : {"grad_priority", "loss_bound", "multipath"})
    EXPECT_FALSE(plain.contains(key)) << key;
}

std::string file_error(const char* key, const nlohmann::json& value) {
  nlohmann::json doc = to_json(dlcp_plan());
  doc[key] = value;
  auto p = plan_from_json(doc, "plan.json");
  return p.ok() ? std::string("ok") : p.error().message;
}

TEST(GradTransport, BadPlanFileValuesNameTheKeyAndTheAllowedValues) {
  EXPECT_EQ(file_error("grad_priority", "fifo"),
            "plan.json: grad_priority: expected one of none|layer|layer+magnitude (got \"fifo\")");
  EXPECT_EQ(file_error("multipath", "hash"),
            "plan.json: multipath: expected one of ecmp|spray (got \"hash\")");
  const std::string range =
      "plan.json: loss_bound: expected a number in [0, 0.1] (the fraction of gradient bytes that "
      "may be dropped)";
  EXPECT_EQ(file_error("loss_bound", 0.2), range);
  EXPECT_EQ(file_error("loss_bound", -0.01), range);
  EXPECT_EQ(file_error("loss_bound", "0.05"), range);
  EXPECT_EQ(file_error("loss_bound", 0.1), "ok");
}

std::string strategy_error(std::string_view text) {
  auto s = parse_strategy(text);
  return s.ok() ? std::string("ok") : s.error().message;
}

TEST(GradTransport, StrategyKeys) {
  auto s = parse_strategy("dp=4,grad_priority=layer+magnitude,loss_bound=0.05,multipath=spray");
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->grad_priority, GradPriority::layer_magnitude);
  EXPECT_EQ(s->loss_bound, 0.05);
  EXPECT_EQ(s->multipath, Multipath::spray);
  EXPECT_EQ(to_string(*s),
            "dp=4,tp=1,pp=1,vpp=1,mbs=1,recompute=none,zero=0,schedule=1f1b,sp=0,"
            "grad_priority=layer+magnitude,loss_bound=0.05,multipath=spray");
  Strategy again = *parse_strategy(to_string(*s));
  again.schedule_given = s->schedule_given;  // the canonical text names the schedule
  EXPECT_EQ(again, *s);
  EXPECT_EQ(strategy_error("grad_priority=fifo"),
            "--strategy: grad_priority=fifo: expected one of none|layer|layer+magnitude");
  EXPECT_EQ(strategy_error("multipath=hash"),
            "--strategy: multipath=hash: expected one of ecmp|spray");
  const char* range =
      ": expected a number in [0, 0.1] (the fraction of gradient bytes that may be dropped per "
      "iteration)";
  EXPECT_EQ(strategy_error("grad_priority=layer,loss_bound=0.5"),
            std::string("--strategy: loss_bound=0.5") + range);
  EXPECT_EQ(strategy_error("grad_priority=layer,loss_bound=-0"), "ok");
  EXPECT_EQ(strategy_error("grad_priority=layer,loss_bound=5%"),
            std::string("--strategy: loss_bound=5%") + range);
  EXPECT_EQ(strategy_error("loss_bound=0.05"),
            "--strategy: loss_bound=0.05: expected grad_priority=layer or "
            "grad_priority=layer+magnitude (late chunks are dropped lowest priority first)");
  EXPECT_EQ(strategy_error("grad_priorty=layer"),
            "--strategy: grad_priorty=layer: unknown key (did you mean 'grad_priority'?) "
            "(allowed: dp, tp, pp, vpp, mbs, gbs, recompute, attention, zero, schedule, sp, bn, "
            "grad_priority, loss_bound, multipath, overlap, precision, adam, loss, metrics)");
}

TEST(GradTransport, StrategyLaysTheSettingsOntoThePlan) {
  const auto m = tiny_gpt(4);
  const auto c = tiny_cluster(8);
  auto s = parse_strategy("dp=4,grad_priority=layer,loss_bound=0.02,multipath=spray");
  ASSERT_TRUE(s.ok());
  auto p = plan_from_strategy(*s, m, c);
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->grad_priority, GradPriority::layer);
  EXPECT_EQ(p->loss_bound, 0.02);
  EXPECT_EQ(p->multipath, Multipath::spray);
}

class GradTransportValidate : public ::testing::Test {
 protected:
  model::Model model_ = tiny_gpt(4);
  cluster::Cluster cluster_ = tiny_cluster(8);
  Plan plan_ = two_stage_plan();
  std::string check() const {
    auto r = validate_plan(plan_, model_, cluster_, "plan.json");
    return r.ok() ? std::string("ok") : r.error().message;
  }
};

TEST_F(GradTransportValidate, EachSettingAloneAndTogether) {
  plan_.multipath = Multipath::spray;
  EXPECT_EQ(check(), "ok");
  plan_.grad_priority = GradPriority::layer;
  EXPECT_EQ(check(), "ok");
  plan_.loss_bound = 0.1;
  EXPECT_EQ(check(), "ok");
}

TEST_F(GradTransportValidate, LossBoundOutOfRangeOrWithoutPriority) {
  plan_.grad_priority = GradPriority::layer;
  plan_.loss_bound = 0.11;
  EXPECT_EQ(check(), "plan.json: loss_bound: expected a number in [0, 0.1], got 0.11");
  plan_.loss_bound = 0.05;
  plan_.grad_priority = GradPriority::none;
  EXPECT_EQ(check(),
            "plan.json: loss_bound: expected grad_priority layer or layer+magnitude with a "
            "loss_bound above 0 (late chunks are dropped lowest priority first)");
}

TEST_F(GradTransportValidate, ChunksCarryWholeGradientsOfStagePlans) {
  plan_.grad_priority = GradPriority::layer;
  plan_.zero_stage = 1;
  EXPECT_EQ(check(),
            "plan.json: zero_stage: expected 0 with grad_priority=layer (chunks carry whole "
            "gradients; ZeRO's sharded ones are not modelled)");
  plan_.zero_stage = 0;
  plan_.grad_sync = {GradSync{"layers.*", SyncMethod::sufficient_factor}};
  EXPECT_EQ(check(),
            "plan.json: grad_sync[0].method: expected all_reduce, parameter_server or none with "
            "grad_priority=layer (sufficient factors are not sent in chunks)");
}

}  // namespace
}  // namespace hetplan::plan
