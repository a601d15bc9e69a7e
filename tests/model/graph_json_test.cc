// Graph JSON (version 1): exact round trips and one-line errors for malformed files.
#include "hetplan/model/graph_json.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "hetplan/model/zoo.h"
#include "load_for_test.h"

namespace hetplan::model {
namespace {

Model load(const std::string& spec) { return testing::load_or_fail(spec); }

TEST(GraphJson, RoundTripIsExact) {
  for (const char* name :
       {"gpt3-125m", "opt-350m", "llama2-70b", "mixtral-8x7b", "bert-base", "vit-b16", "resnet50",
        "inception-v3", "vgg16", "mlp:layers=2,hidden=8,in=4,out=3"}) {
    const Model m = load(name);
    const nlohmann::json doc = to_json(m);
    EXPECT_EQ(doc["version"], 1);
    auto back = model_from_json(nlohmann::json::parse(doc.dump()), "model.json");
    ASSERT_TRUE(back.ok()) << name << ": " << back.error().message;
    EXPECT_TRUE(*back == m) << name;
  }
}

TEST(GraphJson, FileRoundTripThroughLoadModel) {
  const Model m = load("gpt:layers=2,hidden=16,heads=4,seq=8,vocab=32");
  const auto path = std::filesystem::temp_directory_path() / "hetplan_model_test_graph.json";
  { std::ofstream(path) << to_json(m).dump(1); }
  auto back = load_model(path.string());
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_TRUE(*back == m);
  std::filesystem::remove(path);
}

// A three-op graph to break in different ways.
nlohmann::json tiny() {
  return nlohmann::json::parse(R"({
    "version": 1, "name": "tiny", "family": "mlp",
    "layers": [{"name": "l0", "kind": "other", "first_op": 0, "num_ops": 2},
               {"name": "head", "kind": "head", "first_op": 2, "num_ops": 1}],
    "ops": [{"name": "fc", "kind": "matmul", "flops": 10, "params": 6, "gemm": {"m": 1, "n": 2, "k": 3, "batch_count": 1}},
            {"name": "relu", "kind": "elementwise", "inputs": [0]},
            {"name": "loss", "kind": "cross_entropy", "inputs": [1]}]
  })");
}

std::string error_of(const nlohmann::json& doc) {
  auto m = model_from_json(doc, "model.json");
  EXPECT_FALSE(m.ok()) << doc.dump();
  return m.ok() ? std::string() : m.error().message;
}

TEST(GraphJson, MinimalFileReadsWithDefaults) {
  auto m = model_from_json(tiny(), "model.json");
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->ops.size(), 3u);
  EXPECT_EQ(m->ops[2].layer, 1);
  EXPECT_EQ(m->ops[0].shard, ShardKind::replicated);
  EXPECT_EQ(m->dtype, DType::bf16);
  EXPECT_EQ(m->parameters(), 6);
}

TEST(GraphJson, Cycle) {
  auto doc = tiny();
  doc["ops"][0]["inputs"] = {2};
  EXPECT_EQ(error_of(doc),
            "model.json: ops: expected an acyclic graph; found the cycle fc -> relu -> loss -> fc");
  doc = tiny();
  doc["ops"][1]["inputs"] = {1};
  EXPECT_EQ(error_of(doc),
            "model.json: ops: expected an acyclic graph; found the cycle relu -> relu");
}

TEST(GraphJson, NotTopologicallyOrdered) {
  auto doc = tiny();
  doc["ops"][0]["inputs"] = {1};
  doc["ops"][1]["inputs"] = nlohmann::json::array();
  EXPECT_EQ(error_of(doc),
            "model.json: ops[0].inputs[0]: expected an op listed before ops[0] (ops must be in "
            "topological order)");
}

TEST(GraphJson, BadFields) {
  auto doc = tiny();
  doc["ops"][1]["kind"] = "conv3d";
  EXPECT_EQ(error_of(doc).rfind(
                "model.json: ops[1].kind: 'conv3d' is not one of matmul, batched_matmul,", 0),
            0u);
  doc = tiny();
  doc["ops"][1]["shard"] = "diagonal";
  EXPECT_EQ(error_of(doc).rfind(
                "model.json: ops[1].shard: 'diagonal' is not one of replicated, column,", 0),
            0u);
  doc = tiny();
  doc["ops"][2]["inputs"] = {12};
  EXPECT_EQ(error_of(doc), "model.json: ops[2].inputs[0]: expected an op index below 3");
  doc = tiny();
  doc["ops"][2]["inputs"] = {"relu"};
  EXPECT_EQ(error_of(doc), "model.json: ops[2].inputs[0]: expected an op index below 3");
  doc = tiny();
  doc["ops"][0].erase("name");
  EXPECT_EQ(error_of(doc), "model.json: ops[0].name: missing (required)");
  doc = tiny();
  doc["ops"][0]["flops"] = "many";
  EXPECT_EQ(error_of(doc), "model.json: ops[0].flops: expected a number");
  doc = tiny();
  doc["ops"][0]["flops"] = -1;
  EXPECT_EQ(error_of(doc), "model.json: ops[0].flops: expected a number >= 0");
  doc = tiny();
  doc["ops"][1]["params"] = 1'000'000'000'000'000LL;
  EXPECT_EQ(error_of(doc),
            "model.json: ops[1].params: expected the model's parameters to total at most "
            "1000000000000000");
  doc = tiny();
  doc["ops"][0]["params"] = 1.5;
  EXPECT_EQ(error_of(doc), "model.json: ops[0].params: expected an integer");
  doc = tiny();
  doc["ops"][0]["flop"] = 3;
  EXPECT_EQ(error_of(doc).rfind(
                "model.json: ops[0].flop: unknown field (did you mean 'flops'?); expected one of "
                "name, kind,",
                0),
            0u);
  // Unknown keys are refused at every level, not only in ops.
  doc = tiny();
  doc["hiden"] = 64;
  EXPECT_EQ(error_of(doc).rfind(
                "model.json: hiden: unknown field (did you mean 'hidden'?); expected one of "
                "version, name, family, dtype, layers, ops, seq_len,",
                0),
            0u);
  doc = tiny();
  doc["layers"][1]["num_op"] = 1;
  EXPECT_EQ(error_of(doc),
            "model.json: layers[1].num_op: unknown field (did you mean 'num_ops'?); expected one "
            "of name, kind, first_op, num_ops");
  doc = tiny();
  doc["ops"][1]["name"] = "fc";
  EXPECT_EQ(error_of(doc), "model.json: ops[1].name: expected a unique name ('fc' is also ops[0])");
  doc = tiny();
  doc["ops"][0]["gemm"] = 4;
  EXPECT_EQ(error_of(doc), "model.json: ops[0].gemm: expected an object with m, n, k, batch_count");
  doc = tiny();
  doc["ops"][0]["compute"] = {{"fn", "conv3d"}, {"shape", {4}}};
  EXPECT_EQ(
      error_of(doc).rfind(
          "model.json: ops[0].compute.fn: 'conv3d' is not one of none, conv2d, batchnorm,", 0),
      0u);
  doc = tiny();
  doc["ops"][0]["compute"] = {{"fn", "linear"}, {"shape", nlohmann::json::array()}};
  EXPECT_EQ(error_of(doc),
            "model.json: ops[0].compute.shape: expected 1 to 3 sizes (the output per sample)");
  doc = tiny();
  doc["ops"][0]["compute"] = {{"fn", "dropout"}, {"shape", {4}}, {"drop", 1.0}};
  EXPECT_EQ(error_of(doc),
            "model.json: ops[0].compute.drop: expected a probability from 0 to below 1");
  doc = tiny();
  doc["ops"][0]["compute"] = {{"fn", "max_pool"}, {"shape", {4, 2, 2}}, {"stride", 0}};
  EXPECT_EQ(error_of(doc), "model.json: ops[0].compute.stride: expected an integer from 1 to 1024");
  doc = tiny();
  doc["ops"][0]["compute"] = {{"fn", "relu"}, {"shape", {4}}, {"kernel", 3}};
  EXPECT_EQ(error_of(doc).rfind(
                "model.json: ops[0].compute.kernel: unknown field; expected one of fn, shape,", 0),
            0u);
  doc = tiny();
  doc["ops"][2]["layer"] = 0;
  EXPECT_EQ(error_of(doc),
            "model.json: ops[2].layer: expected 1 (the layer whose range holds this op)");
}

TEST(GraphJson, BadDocument) {
  EXPECT_EQ(error_of(nlohmann::json::array()), "model.json: document: expected a JSON object");
  auto doc = tiny();
  doc["version"] = 2;
  EXPECT_EQ(error_of(doc), "model.json: version: expected 1");
  doc.erase("version");
  EXPECT_EQ(error_of(doc), "model.json: version: missing (required)");
  doc = tiny();
  doc["family"] = "rnn";
  EXPECT_EQ(error_of(doc).rfind("model.json: family: 'rnn' is not one of decoder_lm,", 0), 0u);
  doc = tiny();
  doc["ops"] = nlohmann::json::object();
  EXPECT_EQ(error_of(doc), "model.json: ops: expected an array");
  doc = tiny();
  doc["ops"] = nlohmann::json::array();
  EXPECT_EQ(error_of(doc), "model.json: ops: expected at least one op");
  doc = tiny();
  doc["ops"][1] = 7;
  EXPECT_EQ(error_of(doc), "model.json: ops[1]: expected an object");
  doc = tiny();
  doc["hidden"] = -4;
  EXPECT_EQ(error_of(doc), "model.json: hidden: expected an integer from 0 to 2147483647");
}

TEST(GraphJson, LayersCoverOpsContiguously) {
  auto doc = tiny();
  doc["layers"][1]["first_op"] = 1;
  EXPECT_EQ(error_of(doc),
            "model.json: layers[1].first_op: expected 2 (layers cover the ops in order, without "
            "gaps or overlaps)");
  doc = tiny();
  doc["layers"][1]["num_ops"] = 0;
  EXPECT_EQ(error_of(doc), "model.json: layers[1].num_ops: expected an integer from 1 to 1");
  doc = tiny();
  doc["layers"].erase(1);
  EXPECT_EQ(error_of(doc),
            "model.json: layers: expected layers covering all 3 ops; they cover the first 2");
  doc = tiny();
  doc["layers"][0].erase("first_op");
  EXPECT_EQ(error_of(doc), "model.json: layers[0].first_op: missing (required)");
}

TEST(GraphJson, UnreadableOrInvalidFiles) {
  const auto path = std::filesystem::temp_directory_path() / "hetplan_model_test_bad.json";
  { std::ofstream(path) << "{\"version\": 1, \"ops\": ["; }
  auto m = read_model_file(path.string());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().message.rfind(path.string() + ": expected valid JSON (", 0), 0u)
      << m.error().message;
  EXPECT_EQ(m.error().message.find('\n'), std::string::npos);
  std::filesystem::remove(path);
  EXPECT_FALSE(read_model_file(path.string()).ok());
}

}  // namespace
}  // namespace hetplan::model
