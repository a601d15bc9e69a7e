#include "hetplan/plan/plan_json.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "hetplan/plan/strategy.h"
#include "hetplan/plan/validate.h"
#include "plan_fixtures.h"

namespace hetplan::plan {
namespace {

using testing::two_stage_plan;

Plan rich_plan() {
  Plan p = two_stage_plan();
  p.schedule = Schedule::gpipe;
  p.recompute = cost::Recompute::selective;
  p.zero_stage = 2;
  p.sequence_parallel = true;
  p.uneven_collectives = UnevenCollectives::grouped;
  p.batch_norm = BatchNormStats::synced;
  p.grad_bucket_bytes = 12345678.5;
  p.stages[0].replicas[0].tp_shares = {0.1 + 0.2, 1 - (0.1 + 0.2)};  // not short decimals
  p.stages[0].replicas[0].batch_share = 1.0 / 3;
  p.stages[0].replicas[1].batch_share = 2.0 / 3;
  p.op_overrides = {OpOverride{"layers.*.ln*", SplitKind::replicate},
                    OpOverride{"head.lm", SplitKind::tensor}};
  p.grad_sync = {
      GradSync{"layers.0.*", SyncMethod::parameter_server, cost::Algorithm::parameter_server, 3},
      GradSync{"*", SyncMethod::sufficient_factor, cost::Algorithm::hierarchical, -1}};
  return p;
}

TEST(PlanJson, RoundTripIsExact) {
  const Plan p = rich_plan();
  auto back = plan_from_json(to_json(p), "mem");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, p);
  // Through the text too.
  auto text_back = plan_from_json(nlohmann::json::parse(to_json_text(p)), "mem");
  ASSERT_TRUE(text_back.ok()) << text_back.error().message;
  EXPECT_EQ(*text_back, p);
  EXPECT_EQ(to_json_text(*text_back), to_json_text(p));
  // A fused attention core is written and read back; plain (the default) is not written.
  Plan flash = p;
  flash.attention = cost::Attention::flash;
  EXPECT_NE(to_json_text(flash).find("\"attention\": \"flash\""), std::string::npos);
  EXPECT_EQ(to_json_text(p).find("\"attention\""), std::string::npos);
  auto flash_back = plan_from_json(to_json(flash), "mem");
  ASSERT_TRUE(flash_back.ok()) << flash_back.error().message;
  EXPECT_EQ(*flash_back, flash);
  // Likewise the Adam step's form.
  Plan looped = p;
  looped.adam = cost::AdamKernels::per_tensor;
  EXPECT_NE(to_json_text(looped).find("\"adam\": \"per-tensor\""), std::string::npos);
  EXPECT_EQ(to_json_text(p).find("\"adam\""), std::string::npos);
  auto looped_back = plan_from_json(to_json(looped), "mem");
  ASSERT_TRUE(looped_back.ok()) << looped_back.error().message;
  EXPECT_EQ(*looped_back, looped);
  // Likewise the loss's form.
  Plan fused_loss = p;
  fused_loss.loss = cost::Loss::fused;
  EXPECT_NE(to_json_text(fused_loss).find("\"loss\": \"fused\""), std::string::npos);
  EXPECT_EQ(to_json_text(p).find("\"loss\""), std::string::npos);
  auto fused_loss_back = plan_from_json(to_json(fused_loss), "mem");
  ASSERT_TRUE(fused_loss_back.ok()) << fused_loss_back.error().message;
  EXPECT_EQ(*fused_loss_back, fused_loss);
  // Likewise the engine's training metrics; more than kMaxMetrics is refused.
  Plan metrics = fused_loss;
  metrics.metrics = 2;
  EXPECT_NE(to_json_text(metrics).find("\"metrics\": 2"), std::string::npos);
  EXPECT_EQ(to_json_text(p).find("\"metrics\""), std::string::npos);
  auto metrics_back = plan_from_json(to_json(metrics), "mem");
  ASSERT_TRUE(metrics_back.ok()) << metrics_back.error().message;
  EXPECT_EQ(*metrics_back, metrics);
  auto too_many = to_json(metrics);
  too_many["metrics"] = 9;
  auto refused = plan_from_json(too_many, "mem");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message, "mem: metrics: expected an integer in 0..8");
  // Likewise an overlap of collectives: written when set, read back.
  Plan overlapped = p;
  overlapped.overlap = Overlap::tp_param;
  EXPECT_NE(to_json_text(overlapped).find("\"overlap\": \"tp+param\""), std::string::npos);
  EXPECT_EQ(to_json_text(p).find("\"overlap\""), std::string::npos);
  auto overlapped_back = plan_from_json(to_json(overlapped), "mem");
  ASSERT_TRUE(overlapped_back.ok()) << overlapped_back.error().message;
  EXPECT_EQ(*overlapped_back, overlapped);
  // A precision: written when set (fp32 too), read back; unset, not written and read back unset.
  EXPECT_EQ(to_json_text(p).find("\"precision\""), std::string::npos);
  for (model::DType d : {model::DType::bf16, model::DType::fp16, model::DType::fp32}) {
    Plan precise = p;
    precise.precision = d;
    EXPECT_NE(to_json_text(precise).find(fmt::format("\"precision\": \"{}\"", model::to_string(d))),
              std::string::npos);
    auto precise_back = plan_from_json(to_json(precise), "mem");
    ASSERT_TRUE(precise_back.ok()) << precise_back.error().message;
    EXPECT_EQ(*precise_back, precise);
    EXPECT_NE(plan_fingerprint(precise), plan_fingerprint(p));
  }
}

TEST(PlanJson, EveryEnumValueRoundTrips) {
  for (Schedule s : {Schedule::gpipe, Schedule::one_f_one_b, Schedule::interleaved})
    EXPECT_EQ(schedule_from_string(to_string(s)), s);
  for (SplitKind s : {SplitKind::tensor, SplitKind::replicate})
    EXPECT_EQ(split_kind_from_string(to_string(s)), s);
  for (SyncMethod s : {SyncMethod::all_reduce, SyncMethod::parameter_server,
                       SyncMethod::sufficient_factor, SyncMethod::none})
    EXPECT_EQ(sync_method_from_string(to_string(s)), s);
  for (cost::Algorithm a :
       {cost::Algorithm::automatic, cost::Algorithm::ring, cost::Algorithm::tree,
        cost::Algorithm::hierarchical, cost::Algorithm::direct, cost::Algorithm::parameter_server})
    EXPECT_EQ(algorithm_from_string(algorithm_name(a)), a);
  for (cost::Recompute r :
       {cost::Recompute::none, cost::Recompute::selective, cost::Recompute::full})
    EXPECT_EQ(recompute_from_string(recompute_name(r)), r);
  for (cost::Attention a :
       {cost::Attention::plain, cost::Attention::flash, cost::Attention::flash1})
    EXPECT_EQ(attention_from_string(attention_name(a)), a);
  EXPECT_EQ(attention_names(), "plain|flash|flash1");
  for (model::DType d :
       {model::DType::bf16, model::DType::fp16, model::DType::fp32, model::DType::tf32})
    EXPECT_EQ(precision_from_string(precision_name(d)), d);
  EXPECT_EQ(precision_names(), "bf16|fp16|fp32|tf32");
  for (auto k :
       {cost::AdamKernels::fused, cost::AdamKernels::foreach, cost::AdamKernels::per_tensor})
    EXPECT_EQ(adam_from_string(adam_name(k)), k);
  EXPECT_EQ(adam_names(), "fused|foreach|per-tensor");
  EXPECT_EQ(loss_names(), "unfused|fused");
  for (auto l : {cost::Loss::unfused, cost::Loss::fused})
    EXPECT_EQ(loss_from_string(loss_name(l)), l);
  EXPECT_FALSE(precision_from_string("fp8").has_value());
  for (Overlap o : {Overlap::none, Overlap::tp, Overlap::param, Overlap::tp_param})
    EXPECT_EQ(overlap_from_string(to_string(o)), o);
  EXPECT_EQ(overlap_names(), "none|tp|param|tp+param");
  EXPECT_TRUE(overlaps_tp(Overlap::tp) && overlaps_tp(Overlap::tp_param));
  EXPECT_FALSE(overlaps_tp(Overlap::param) || overlaps_tp(Overlap::none));
  EXPECT_TRUE(overlaps_param_gather(Overlap::param) && overlaps_param_gather(Overlap::tp_param));
  EXPECT_FALSE(overlaps_param_gather(Overlap::tp) || overlaps_param_gather(Overlap::none));
  EXPECT_FALSE(schedule_from_string("1F1B").has_value());
  EXPECT_EQ(schedule_names(), "gpipe|1f1b|interleaved");
}

TEST(PlanJson, TextHasStableKeyOrderAndCompactArrays) {
  Plan p;
  p.model = "m";
  p.cluster = "c";
  p.planner = "hand";
  p.global_batch = 8;
  p.num_microbatches = 2;
  p.stages = {Stage{0, 3, {Replica{{0, 1}, {0.75, 0.25}, 1.0}}}};
  p.grad_sync = {GradSync{}};
  const std::string expected = R"({
  "version": 1,
  "model": "m",
  "cluster": "c",
  "planner": "hand",
  "global_batch": 8,
  "num_microbatches": 2,
  "schedule": "1f1b",
  "recompute": "none",
  "zero_stage": 0,
  "sequence_parallel": false,
  "grad_bucket_bytes": 25000000.0,
  "stages": [
    {
      "first_layer": 0,
      "num_layers": 3,
      "replicas": [
        {
          "devices": [0, 1],
          "tp_shares": [0.75, 0.25],
          "batch_share": 1.0
        }
      ]
    }
  ],
  "op_overrides": [],
  "grad_sync": [
    {
      "ops": "*",
      "method": "all_reduce",
      "algorithm": "auto",
      "priority": 0
    }
  ]
}
)";
  EXPECT_EQ(to_json_text(p), expected);
}

TEST(PlanJson, FingerprintIsStableAndSensitive) {
  const Plan p = rich_plan();
  EXPECT_EQ(plan_fingerprint(p), plan_fingerprint(rich_plan()));
  EXPECT_EQ(plan_fingerprint(p).size(), 16u);
  Plan q = p;
  q.stages[0].replicas[0].tp_shares[0] = std::nextafter(q.stages[0].replicas[0].tp_shares[0], 1.0);
  EXPECT_NE(plan_fingerprint(p), plan_fingerprint(q));
}

TEST(PlanJson, DefaultsForOptionalFields) {
  auto doc = nlohmann::json::parse(R"({"version": 1, "global_batch": 4,
      "stages": [{"first_layer": 0, "num_layers": 2, "replicas": [{"devices": [0], "batch_share": 1}]}]})");
  auto p = plan_from_json(doc, "plan.json");
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->num_microbatches, 1);
  EXPECT_EQ(p->schedule, Schedule::one_f_one_b);
  EXPECT_EQ(p->recompute, cost::Recompute::none);
  EXPECT_EQ(p->grad_bucket_bytes, 25e6);
  EXPECT_TRUE(p->stages[0].replicas[0].tp_shares.empty());
  EXPECT_TRUE(p->grad_sync.empty());
}

// Each case edits a valid document and expects one exact message.
struct BadField {
  const char* pointer;  // JSON pointer to set (or "-" + pointer to remove)
  const char* value;    // JSON text
  const char* message;
};

class PlanJsonBadField : public ::testing::TestWithParam<BadField> {};

TEST_P(PlanJsonBadField, NamesSourceFieldAndExpectation) {
  const BadField& c = GetParam();
  nlohmann::json doc = to_json(rich_plan());
  std::string ptr = c.pointer;
  if (ptr.front() == '-') {
    nlohmann::json::json_pointer jp(ptr.substr(1));
    doc[jp.parent_pointer()].erase(jp.back());
  } else {
    doc[nlohmann::json::json_pointer(ptr)] = nlohmann::json::parse(c.value);
  }
  auto p = plan_from_json(doc, "plan.json");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().message, c.message);
}

INSTANTIATE_TEST_SUITE_P(
    Fields, PlanJsonBadField,
    ::testing::Values(
        BadField{"/version", "2", "plan.json: version: expected 1"},
        BadField{"-/version", "", "plan.json: version: missing (required)"},
        BadField{"/model", "3", "plan.json: model: expected a string"},
        BadField{"/attention", "\"fast\"",
                 "plan.json: attention: expected one of plain|flash|flash1 (got \"fast\")"},
        BadField{"/precision", "\"fp8\"",
                 "plan.json: precision: expected one of bf16|fp16|fp32|tf32 (got \"fp8\")"},
        BadField{"/global_batch", "0",
                 "plan.json: global_batch: expected an integer in 1..1048576"},
        BadField{"/global_batch", "2.5",
                 "plan.json: global_batch: expected an integer in 1..1048576"},
        BadField{"/global_batch", "2147483648",
                 "plan.json: global_batch: expected an integer in 1..1048576"},
        BadField{"-/global_batch", "", "plan.json: global_batch: missing (required)"},
        BadField{"/num_microbatches", "\"4\"",
                 "plan.json: num_microbatches: expected an integer in 1..65536"},
        BadField{"/num_microbatches", "4294967296",
                 "plan.json: num_microbatches: expected an integer in 1..65536"},
        BadField{"/schedule", "\"pipedream\"",
                 "plan.json: schedule: expected one of gpipe|1f1b|interleaved (got \"pipedream\")"},
        BadField{"/recompute", "true", "plan.json: recompute: expected one of none|selective|full"},
        BadField{"/zero_stage", "4", "plan.json: zero_stage: expected an integer in 0..3"},
        BadField{"/sequence_parallel", "1", "plan.json: sequence_parallel: expected true or false"},
        BadField{"/grad_bucket_bytes", "-1", "plan.json: grad_bucket_bytes: expected a number > 0"},
        BadField{"/uneven_collectives", "\"even\"",
                 "plan.json: uneven_collectives: expected one of auto|padded|grouped (got "
                 "\"even\")"},
        BadField{"/batch_norm", "\"global\"",
                 "plan.json: batch_norm: expected one of local|synced (got \"global\")"},
        BadField{"/stages", "[]", "plan.json: stages: expected a non-empty array of stages"},
        BadField{"/stages", "{}", "plan.json: stages: expected a non-empty array of stages"},
        BadField{"/stages/1", "7", "plan.json: stages[1]: expected an object"},
        BadField{"/stages/1/first_layer", "-1",
                 "plan.json: stages[1].first_layer: expected an integer >= 0"},
        BadField{"/stages/0/num_layers", "0",
                 "plan.json: stages[0].num_layers: expected an integer >= 1"},
        BadField{"/stages/0/replicas", "[]",
                 "plan.json: stages[0].replicas: expected a non-empty array of replicas"},
        BadField{"/stages/1/replicas/0/batch_share", "1.5",
                 "plan.json: stages[1].replicas[0].batch_share: expected a number in (0, 1]"},
        BadField{"/stages/1/replicas/0/batch_share", "0",
                 "plan.json: stages[1].replicas[0].batch_share: expected a number in (0, 1]"},
        BadField{"/stages/1/replicas/0/batch_share", "\"half\"",
                 "plan.json: stages[1].replicas[0].batch_share: expected a number in (0, 1]"},
        BadField{"-/stages/1/replicas/0/batch_share", "",
                 "plan.json: stages[1].replicas[0].batch_share: missing (required)"},
        BadField{
            "/stages/0/replicas/1/devices", "[]",
            "plan.json: stages[0].replicas[1].devices: expected a non-empty array of device ids"},
        BadField{
            "/stages/0/replicas/1/devices/1", "-3",
            "plan.json: stages[0].replicas[1].devices[1]: expected a device id (an integer >= 0)"},
        BadField{
            "/stages/0/replicas/1/devices/1", "1.5",
            "plan.json: stages[0].replicas[1].devices[1]: expected a device id (an integer >= 0)"},
        BadField{"/stages/0/replicas/0/tp_shares/1", "0",
                 "plan.json: stages[0].replicas[0].tp_shares[1]: expected a number > 0"},
        BadField{"/stages/0/replicas/0/tp_shares", "0.5",
                 "plan.json: stages[0].replicas[0].tp_shares: expected an array of positive "
                 "numbers (or [] for even shares)"},
        BadField{"/stages/0/replicas/0/extra", "1",
                 "plan.json: stages[0].replicas[0].extra: unknown key (allowed: devices, "
                 "tp_shares, batch_share)"},
        BadField{"/stages/0/layers", "1",
                 "plan.json: stages[0].layers: unknown key (allowed: first_layer, num_layers, "
                 "replicas)"},
        BadField{
            "/microbatches", "1",
            "plan.json: microbatches: unknown key (did you mean 'num_microbatches'?) (allowed: "
            "version, model, cluster, planner, "
            "global_batch, "
            "num_microbatches, schedule, recompute, attention, precision, adam, loss, metrics, "
            "overlap, "
            "zero_stage, "
            "sequence_parallel, "
            "uneven_collectives, batch_norm, grad_bucket_bytes, grad_priority, loss_bound, "
            "multipath, stages, "
            "op_overrides, grad_sync, op_groups, execution_order)"},
        BadField{"/op_overrides/0/ops", "\"\"",
                 "plan.json: op_overrides[0].ops: expected a non-empty op name or pattern "
                 "(\"layers.3.*\")"},
        BadField{"/op_overrides/1/split", "\"column\"",
                 "plan.json: op_overrides[1].split: expected one of "
                 "tensor|replicate|batch|batch_sharded (got \"column\")"},
        BadField{"/grad_sync/0/method", "\"allreduce\"",
                 "plan.json: grad_sync[0].method: expected one of "
                 "all_reduce|parameter_server|sufficient_factor|none "
                 "(got \"allreduce\")"},
        BadField{
            "/grad_sync/1/algorithm", "\"butterfly\"",
            "plan.json: grad_sync[1].algorithm: expected one of auto|ring|tree|hierarchical|direct|"
            "parameter_server (got \"butterfly\")"},
        BadField{"/grad_sync/1/priority", "0.5",
                 "plan.json: grad_sync[1].priority: expected an integer"},
        BadField{"/grad_sync", "{}",
                 "plan.json: grad_sync: expected an array of {ops, method, algorithm, priority}"}));

TEST(PlanJson, TopLevelMustBeAnObject) {
  auto p = plan_from_json(nlohmann::json::array(), "plan.json");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().message, "plan.json: expected a JSON object at the top level");
}

class PlanFile : public ::testing::Test {
 protected:
  std::string write(const std::string& text) {
    std::ofstream(path_) << text;
    return path_;
  }
  void TearDown() override { std::filesystem::remove(path_); }
  std::string path_ = (std::filesystem::temp_directory_path() /
                       ("hetplan_plan_test_" + std::to_string(::getpid()) + ".json"))
                          .string();
};

TEST_F(PlanFile, MalformedJsonNamesFileAndPosition) {
  const std::string file = write("{\n  \"version\": 1,\n  \"stages\": [,]\n}\n");
  auto p = read_plan_file(file);
  ASSERT_FALSE(p.ok());
  const std::string& msg = p.error().message;
  EXPECT_EQ(msg.rfind(file + ": invalid JSON: parse error at line 3, column 14: ", 0), 0u) << msg;
}

TEST_F(PlanFile, TruncatedFile) {
  const std::string file = write("{\"version\": 1, \"stages\": [");
  auto p = read_plan_file(file);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find(file + ": invalid JSON: parse error at line 1"),
            std::string::npos)
      << p.error().message;
}

TEST_F(PlanFile, WrittenTextReadsBack) {
  const Plan p = rich_plan();
  auto back = read_plan_file(write(to_json_text(p)));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, p);
}

TEST(PlanFileMissing, NamesTheFile) {
  auto p = read_plan_file("/nonexistent/plan.json");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().message, "/nonexistent/plan.json: cannot read: no such file");
}

std::string example(const std::string& name) {
  return (std::filesystem::path(HETPLAN_SOURCE_DIR) / "data" / "plans" / name).string();
}

// The interleaved example is exactly what the shorthand lays out (on a stand-in of the same shape).
TEST(ExamplePlans, InterleavedExampleIsTheStrategyLayout) {
  auto file = read_plan_file(example("gpt3-125m-dgx-a100-interleaved.json"));
  ASSERT_TRUE(file.ok()) << file.error().message;
  model::Model m = testing::tiny_gpt(12, 12, 12);
  m.name = "gpt3-125m";
  cluster::Cluster c = testing::tiny_cluster(8);
  c.name = "dgx-a100:1";
  auto s = parse_strategy("tp=2,pp=2,vpp=2");
  ASSERT_TRUE(s.ok());
  auto p = plan_from_strategy(*s, m, c);
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(*file, *p);
  EXPECT_TRUE(validate_plan(*file, m, c, "example").ok());
}

TEST(ExamplePlans, HeterogExampleValidatesOnAStandIn) {
  auto file = read_plan_file(example("gpt3-125m-heterog-2stage.json"));
  ASSERT_TRUE(file.ok()) << file.error().message;
  auto v =
      validate_plan(*file, testing::tiny_gpt(12, 12, 12), testing::tiny_cluster(8, 2), "example");
  EXPECT_TRUE(v.ok()) << v.error().message;
}

TEST(ExamplePlans, AllParse) {
  const std::filesystem::path dir = std::filesystem::path(HETPLAN_SOURCE_DIR) / "data" / "plans";
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    ++count;
    auto p = read_plan_file(entry.path().string());
    EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
  }
  EXPECT_GE(count, 2);
}

}  // namespace
}  // namespace hetplan::plan
