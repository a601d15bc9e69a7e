// Runs of `hetplan groups`: the JSON covers every op once, and bad arguments name themselves.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "run_command.h"

namespace hetplan::cli {
namespace {

using testing::run_hetplan;

constexpr const char* kSmallResnet = "resnet:depth=18,width=8,image=32";

TEST(GroupsCli, JsonHasFourGroupsCoveringEveryOp) {
  auto r = run_hetplan(std::string("groups --model ") + kSmallResnet + " --groups 4 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["requested_groups"].get<int>(), 4);
  EXPECT_EQ(j["num_groups"].get<int>(), 4);
  EXPECT_EQ(j["device"].get<std::string>(), "A100-SXM4-80GB");
  EXPECT_GT(j["cut_bytes_per_sample"].get<double>(), 0);
  ASSERT_EQ(j["groups"].size(), 4u);
  std::set<std::string> names;
  std::size_t ops = 0;
  double seconds = 0;
  for (std::size_t g = 0; g < j["groups"].size(); ++g) {
    const auto& group = j["groups"][g];
    EXPECT_EQ(group["id"].get<std::size_t>(), g);
    EXPECT_FALSE(group["ops"].empty());
    EXPECT_EQ(group["num_ops"].get<std::size_t>(), group["ops"].size());
    EXPECT_GT(group["compute_s_per_sample"].get<double>(), 0);
    EXPECT_GE(group["params"].get<double>(), 0);
    seconds += group["compute_s_per_sample"].get<double>();
    for (const auto& n : group["ops"]) {
      names.insert(n.get<std::string>());
      ++ops;
    }
  }
  EXPECT_EQ(ops, j["num_ops"].get<std::size_t>());
  EXPECT_EQ(names.size(), ops) << "an op in two groups";
  EXPECT_GT(seconds, 0);
  // The same seed gives the same output.
  auto again = run_hetplan(std::string("groups --model ") + kSmallResnet + " --groups 4 --json");
  EXPECT_EQ(again.out, r.out);
}

TEST(GroupsCli, TextHasOneLinePerGroup) {
  auto r = run_hetplan(std::string("groups -m ") + kSmallResnet + " -k 3 --seed 5 --device v100");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("3 groups"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("V100"), std::string::npos) << r.out;
  int lines = 0;
  for (char c : r.out) lines += c == '\n';
  EXPECT_EQ(lines, 2 + 3) << r.out;  // summary, header, one per group
}

TEST(GroupsCli, DefaultGroupCount) {
  auto r = run_hetplan("groups --model inception-v3 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_GE(j["requested_groups"].get<int>(), 8);
  EXPECT_LE(j["requested_groups"].get<int>(), 64);
  EXPECT_LE(j["num_groups"].get<int>(), j["requested_groups"].get<int>());
}

// METIS complains on stdout for this case ("Cannot bisect a graph with 0 vertices") and gives
// fewer groups than asked: the complaint must not reach hetplan's JSON.
TEST(GroupsCli, MetisComplaintsStayOutOfTheJson) {
  auto r = run_hetplan(
      "groups --model vgg:depth=11,image=64 --device V100-SXM2-16GB --seed 23 "
      "--groups 11 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("***"), std::string::npos) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["requested_groups"].get<int>(), 11);
  EXPECT_LE(j["num_groups"].get<int>(), 11);
}

TEST(GroupsCli, BadArgumentsExitTwoNamingThem) {
  for (const char* bad : {" --groups 0", " --groups -3"}) {
    auto r = run_hetplan(std::string("groups --model ") + kSmallResnet + bad);
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_NE(r.err.find("--groups"), std::string::npos) << r.err;
  }
  auto seed = run_hetplan(std::string("groups --model ") + kSmallResnet + " --seed -1");
  EXPECT_EQ(seed.exit_code, 2);
  EXPECT_NE(seed.err.find("--seed"), std::string::npos) << seed.err;
  auto model = run_hetplan("groups --model no-such-model");
  EXPECT_EQ(model.exit_code, 2);
  EXPECT_NE(model.err.find("--model"), std::string::npos) << model.err;
  auto device = run_hetplan(std::string("groups --model ") + kSmallResnet + " --device tpu9");
  EXPECT_EQ(device.exit_code, 2);
  EXPECT_NE(device.err.find("--device"), std::string::npos) << device.err;
  EXPECT_NE(device.err.find("tpu9"), std::string::npos) << device.err;
}

}  // namespace
}  // namespace hetplan::cli
