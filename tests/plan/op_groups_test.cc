// Op-level plans: JSON round trips, validation messages, group lookup.
#include "hetplan/plan/op_groups.h"

#include <gtest/gtest.h>

#include "hetplan/model/zoo.h"
#include "hetplan/plan/plan_json.h"
#include "hetplan/plan/validate.h"
#include "plan_fixtures.h"

namespace hetplan::plan {
namespace {

using testing::tiny_cluster;
using testing::tiny_cnn;

// tiny_cnn(4): block0.conv .. block3.conv on 8 devices.
Plan op_level_plan() {
  Plan p;
  p.global_batch = 8;
  p.op_groups.push_back(OpGroup{{"block0.*", "block1.conv"},
                                {0, 1, 2},
                                {0.5, 0.25, 0.25},
                                GroupMode::replicate,
                                SyncMethod::all_reduce,
                                cost::Algorithm::ring,
                                {},
                                {},
                                {}});
  p.op_groups.push_back(OpGroup{{"block2.conv"},
                                {3, 4},
                                {},
                                GroupMode::replicate,
                                SyncMethod::parameter_server,
                                cost::Algorithm::automatic,
                                {4},
                                {},
                                {}});
  p.op_groups.push_back(OpGroup{{"block3.conv"},
                                {5},
                                {},
                                GroupMode::place,
                                SyncMethod::all_reduce,
                                cost::Algorithm::automatic,
                                {},
                                {},
                                {}});
  p.execution_order = ExecutionOrder::fifo;
  return p;
}

class OpGroups : public ::testing::Test {
 protected:
  model::Model model_ = tiny_cnn(4);
  cluster::Cluster cluster_ = tiny_cluster(8);
  Plan plan_ = op_level_plan();
  std::string check() const {
    auto r = validate_plan(plan_, model_, cluster_, "plan.json");
    return r.ok() ? std::string("ok") : r.error().message;
  }
};

TEST_F(OpGroups, RoundTripThroughJson) {
  EXPECT_EQ(check(), "ok");
  const std::string text = to_json_text(plan_);
  auto back = plan_from_json(nlohmann::json::parse(text), "plan.json");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, plan_);
  EXPECT_EQ(to_json_text(*back), text);
  EXPECT_EQ(text.find("\"stages\""), std::string::npos);
  EXPECT_NE(text.find("\"execution_order\": \"fifo\""), std::string::npos);
}

TEST_F(OpGroups, GroupOfEachOp) {
  EXPECT_EQ(group_of_ops(plan_, model_), (std::vector<int>{0, 0, 1, 2}));
  EXPECT_DOUBLE_EQ(group_share(plan_.op_groups[0], 1), 0.25);
  EXPECT_DOUBLE_EQ(group_share(plan_.op_groups[1], 1), 0.5);
  EXPECT_DOUBLE_EQ(group_share(plan_.op_groups[2], 0), 1.0);
}

TEST_F(OpGroups, GroupWithoutDevices) {
  plan_.op_groups[1].devices.clear();
  plan_.op_groups[1].servers.clear();
  EXPECT_EQ(check(), "plan.json: op_groups[1].devices: expected at least one device");
}

TEST_F(OpGroups, OpInTwoGroups) {
  plan_.op_groups[2].ops.push_back("block1.conv");
  EXPECT_EQ(check(),
            "plan.json: op_groups[2].ops[1]: op \"block1.conv\" is already in op_groups[0] "
            "(expected every op in exactly one group)");
}

TEST_F(OpGroups, OpInNoGroup) {
  plan_.op_groups[0].ops = {"block1.conv"};
  EXPECT_EQ(check(),
            "plan.json: op_groups: op \"block0.conv\" is in no group (expected every op "
            "in exactly one group)");
}

TEST_F(OpGroups, UnknownOpAndPattern) {
  plan_.op_groups[1].ops = {"block2.conv", "nope"};
  EXPECT_EQ(check(), "plan.json: op_groups[1].ops[1]: the model has no op \"nope\"");
  plan_.op_groups[1].ops = {"block2.*", "x*"};
  EXPECT_EQ(check(), "plan.json: op_groups[1].ops[1]: pattern \"x*\" matches no op of the model");
}

TEST_F(OpGroups, ServerOutsideTheGroup) {
  plan_.op_groups[1].servers = {6};
  EXPECT_EQ(check(),
            "plan.json: op_groups[1].servers[0]: server 6 is not one of the group's devices");
}

TEST_F(OpGroups, ServersNeedAParameterServer) {
  plan_.op_groups[1].sync = SyncMethod::all_reduce;
  EXPECT_EQ(check(),
            "plan.json: op_groups[1].servers: servers apply to sync parameter_server, not "
            "all_reduce");
}

TEST_F(OpGroups, PlacedGroupHasOneDevice) {
  plan_.op_groups[2].devices = {5, 6};
  EXPECT_EQ(check(),
            "plan.json: op_groups[2].devices: a placed group runs on exactly one device, "
            "got 2");
}

// A split group: every device sees every sample and holds its tensor share of each op.
TEST_F(OpGroups, SplitGroupsRoundTripAndAreChecked) {
  plan_.op_groups[1] = OpGroup{{"block2.conv"},
                               {3, 4},
                               {0.75, 0.25},
                               GroupMode::split,
                               SyncMethod::all_reduce,
                               cost::Algorithm::automatic,
                               {},
                               {},
                               {}};
  EXPECT_EQ(check(), "ok");
  const std::string text = to_json_text(plan_);
  EXPECT_NE(text.find("\"mode\": \"split\""), std::string::npos);
  EXPECT_EQ(text.find("\"servers\""), std::string::npos);
  auto back = plan_from_json(nlohmann::json::parse(text), "plan.json");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, plan_);
  EXPECT_DOUBLE_EQ(group_share(plan_.op_groups[1], 1), 1.0);
  EXPECT_DOUBLE_EQ(tensor_share(plan_.op_groups[1], 1), 0.25);
  EXPECT_DOUBLE_EQ(tensor_share(plan_.op_groups[0], 1), 1.0);
  plan_.op_groups[1].shares.clear();
  EXPECT_DOUBLE_EQ(tensor_share(plan_.op_groups[1], 0), 0.5);
  plan_.op_groups[1].devices = {3};
  EXPECT_EQ(check(),
            "plan.json: op_groups[1].devices: a split group spans at least two devices (one "
            "device: mode place)");
  plan_.op_groups[1].devices = {3, 4};
  plan_.op_groups[1].servers = {4};
  EXPECT_EQ(check(),
            "plan.json: op_groups[1].servers: a split group holds a share of each weight and "
            "takes no servers or algorithm (its replicas, if several, all-reduce their gradients, "
            "sum them on parameter servers, the first replica's devices, or gather their "
            "sufficient factors)");
  plan_.op_groups[1].servers.clear();
  // Sufficient factors need replicas to gather them from.
  plan_.op_groups[1].sync = SyncMethod::sufficient_factor;
  EXPECT_EQ(check(),
            "plan.json: op_groups[1].sync: expected all_reduce, or parameter_server or "
            "sufficient_factor for a split group of several replicas (got sufficient_factor for 1 "
            "replica)");
  plan_.op_groups[1].sync = SyncMethod::all_reduce;
  plan_.op_groups[1].shares = {0.5, 0.25};
  EXPECT_EQ(check(), "plan.json: op_groups[1].shares: expected shares summing to 1, got 0.75");
}

// A split group of several replicas: each replica holds its batch share of every micro-batch and
// its devices their tensor shares of it.
// replica_members against a scan of replica_of over every place, for groups whose replicas count
// every place, fewer places than there are (the rest is replica 0's), none, and groups not split.
TEST(ReplicaMembers, AreThePlacesReplicaOfGives) {
  for (GroupMode mode : {GroupMode::split, GroupMode::replicate})
    for (const std::vector<int>& sizes :
         std::vector<std::vector<int>>{{}, {4}, {1, 3}, {2, 1, 1}, {1, 1}, {3, 3}})
      for (std::size_t n : {0u, 1u, 4u, 5u}) {
        OpGroup g;
        g.mode = mode;
        g.replica_sizes = sizes;
        for (std::size_t j = 0; j < n; ++j) g.devices.push_back(static_cast<int>(10 + j));
        for (int r = -1; r <= static_cast<int>(sizes.size()) + 1; ++r) {
          std::vector<std::size_t> want;
          for (std::size_t j = 0; j < n; ++j)
            if (replica_of(g, j) == r) want.push_back(j);
          EXPECT_EQ(replica_members(g, r), want)
              << "mode " << static_cast<int>(mode) << ", " << sizes.size() << " sizes, " << n
              << " places, replica " << r;
        }
      }
}

TEST_F(OpGroups, SplitGroupsOfReplicasRoundTripAndAreChecked) {
  OpGroup& g = plan_.op_groups[1];
  g.mode = GroupMode::split;
  g.sync = SyncMethod::all_reduce;
  g.servers.clear();
  g.devices = {3, 4, 6, 7, 2};
  g.replica_sizes = {2, 1, 2};
  g.batch_shares = {0.5, 0.25, 0.25};
  g.shares = {0.75, 0.25, 1, 0.5, 0.5};
  EXPECT_EQ(check(), "ok");
  const std::string text = to_json_text(plan_);
  EXPECT_NE(text.find("\"replica_sizes\""), std::string::npos);
  auto back = plan_from_json(nlohmann::json::parse(text), "plan.json");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, plan_);
  // Replicas may sum the gradients of their matmuls by sufficient factors.
  g.sync = SyncMethod::sufficient_factor;
  EXPECT_EQ(check(), "ok");
  back = plan_from_json(nlohmann::json::parse(to_json_text(plan_)), "plan.json");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, plan_);
  g.sync = SyncMethod::all_reduce;
  // A group laid out alike (the sync aside) is one layout; another order of the devices, other
  // batch or tensor shares, or other replicas are not.
  OpGroup twin = g;
  twin.ops = {"x"};
  twin.sync = SyncMethod::sufficient_factor;
  EXPECT_TRUE(same_split_layout(g, twin));
  twin.batch_shares = {0.25, 0.5, 0.25};
  EXPECT_FALSE(same_split_layout(g, twin));
  twin = g;
  twin.shares = {0.5, 0.5, 1, 0.5, 0.5};
  EXPECT_FALSE(same_split_layout(g, twin));
  twin = g;
  twin.devices = {4, 3, 6, 7, 2};
  EXPECT_FALSE(same_split_layout(g, twin));
  twin = g;
  twin.replica_sizes = {2, 2, 1};
  twin.shares = {0.75, 0.25, 0.5, 0.5, 1};
  EXPECT_FALSE(same_split_layout(g, twin));
  EXPECT_FALSE(same_split_layout(plan_.op_groups[0], plan_.op_groups[0]));  // not split
  EXPECT_EQ(replica_count(g), 3);
  EXPECT_EQ(replica_of(g, 1), 0);
  EXPECT_EQ(replica_of(g, 2), 1);
  EXPECT_EQ(replica_of(g, 4), 2);
  EXPECT_EQ(replica_begin(g, 2), 3u);
  EXPECT_EQ(replica_members(g, 2), (std::vector<std::size_t>{3, 4}));
  EXPECT_TRUE(replica_places(g).empty());  // replicas of unlike sizes
  // Replicas that split alike once each one's devices are taken in increasing order: device 3 of
  // the first and 6 of the second hold 3/4, devices 4 and 7 the rest.
  OpGroup alike = g;
  alike.devices = {4, 3, 6, 7};
  alike.replica_sizes = {2, 2};
  alike.batch_shares.clear();
  alike.shares = {0.25, 0.75, 0.75, 0.25};
  EXPECT_EQ(replica_places(alike), (std::vector<std::vector<std::size_t>>{{1, 2}, {0, 3}}));
  EXPECT_TRUE(zero_shards(alike));  // over each place's devices
  alike.shares = {0.75, 0.25, 0.75, 0.25};
  EXPECT_TRUE(replica_places(alike).empty());
  EXPECT_FALSE(zero_shards(alike));  // replicas that split unlike
  EXPECT_FALSE(zero_shards(g));
  // Replicated groups: several devices that all hold the summed gradients, not parameter servers'.
  OpGroup replicated;
  replicated.devices = {0, 1};
  EXPECT_TRUE(zero_shards(replicated));
  replicated.sync = SyncMethod::sufficient_factor;
  EXPECT_TRUE(zero_shards(replicated));
  replicated.sync = SyncMethod::parameter_server;
  EXPECT_FALSE(zero_shards(replicated));
  replicated.sync = SyncMethod::all_reduce;
  replicated.devices = {1};
  EXPECT_FALSE(zero_shards(replicated));
  EXPECT_DOUBLE_EQ(group_share(g, 1), 0.5);
  EXPECT_DOUBLE_EQ(group_share(g, 2), 0.25);
  EXPECT_DOUBLE_EQ(tensor_share(g, 1), 0.25);
  EXPECT_DOUBLE_EQ(tensor_share(g, 2), 1.0);
  g.shares.clear();
  g.batch_shares.clear();
  EXPECT_DOUBLE_EQ(tensor_share(g, 0), 0.5);
  EXPECT_DOUBLE_EQ(tensor_share(g, 2), 1.0);
  EXPECT_DOUBLE_EQ(group_share(g, 3), 1.0 / 3);
  EXPECT_EQ(check(), "ok");
  g.shares = {0.75, 0.25, 1, 0.5, 0.25};
  EXPECT_EQ(check(),
            "plan.json: op_groups[1].shares: expected the shares of each replica to sum to 1; "
            "replica 2's sum to 0.75");
  g.shares.clear();
  g.replica_sizes = {2, 2};
  EXPECT_EQ(check(),
            "plan.json: op_groups[1].replica_sizes: expected replica sizes summing to the group's "
            "5 devices, got 4");
  g.replica_sizes = {1, 1, 1, 1, 1};
  EXPECT_EQ(check(),
            "plan.json: op_groups[1].replica_sizes: expected a replica of at least two devices "
            "(replicas of one device each: mode replicate)");
  g.replica_sizes = {2, 1, 2};
  g.batch_shares = {0.5, 0.5};
  EXPECT_EQ(check(),
            "plan.json: op_groups[1].batch_shares: expected 3 shares (one per device) or none, "
            "got 2");
  g.replica_sizes.clear();
  EXPECT_EQ(check(),
            "plan.json: op_groups[1].batch_shares: expected replica_sizes with batch_shares (one "
            "share per replica)");
  auto doc = nlohmann::json::parse(to_json_text(plan_));
  doc["op_groups"][0]["replica_sizes"] = {1, 2};
  auto bad = plan_from_json(doc, "plan.json");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message,
            "plan.json: op_groups[0].replica_sizes: applies to split groups only (their replicas "
            "of tensor-parallel devices)");
}

TEST_F(OpGroups, SharesAndDevices) {
  plan_.op_groups[0].shares = {0.5, 0.5};
  EXPECT_EQ(check(),
            "plan.json: op_groups[0].shares: expected 3 shares (one per device) or none, got 2");
  plan_.op_groups[0].shares = {0.5, 0.3, 0.3};
  EXPECT_EQ(check(), "plan.json: op_groups[0].shares: expected shares summing to 1, got 1.1");
  plan_.op_groups[0].shares = {};
  plan_.op_groups[0].devices = {0, 9, 2};
  EXPECT_EQ(check(),
            "plan.json: op_groups[0].devices[1]: device 9 does not exist (the cluster has 8 "
            "devices)");
}

TEST_F(OpGroups, SettingsOpLevelPlansDoNotTake) {
  plan_.zero_stage = 1;
  EXPECT_EQ(check(), "ok");
  plan_.zero_stage = 2;
  EXPECT_EQ(check(),
            "plan.json: zero_stage: expected 0 or 1 for an op-level plan (ZeRO-1 shards a "
            "replicated group's optimizer states over its devices, and a split group's over its "
            "replicas; stages 2 and 3 are not modelled there)");
}

TEST_F(OpGroups, FileErrorsNameTheField) {
  auto read = [](const std::string& text) {
    auto r = plan_from_json(nlohmann::json::parse(text), "p.json");
    return r ? std::string("ok") : r.error().message;
  };
  EXPECT_EQ(read(R"({"version": 1, "global_batch": 8, "op_groups": []})"),
            "p.json: op_groups: expected a non-empty array of op groups");
  EXPECT_EQ(read(R"({"version": 1, "global_batch": 8,
                     "op_groups": [{"ops": ["a"], "devices": [0], "mode": "shard"}]})"),
            "p.json: op_groups[0].mode: expected one of replicate|place|split (got \"shard\")");
  EXPECT_EQ(read(R"({"version": 1, "global_batch": 8,
                     "op_groups": [{"ops": ["a"], "devices": [0, 1], "mode": "split",
                                    "algorithm": "ring"}]})"),
            "p.json: op_groups[0].algorithm: a split group holds a share of each weight and "
            "takes no servers or algorithm (its replicas, if several, all-reduce their gradients, "
            "sum them on parameter servers, the first replica's devices, or gather their "
            "sufficient factors)");
  EXPECT_EQ(read(R"({"version": 1, "global_batch": 8, "stages": [],
                     "op_groups": [{"ops": ["a"], "devices": [0]}]})"),
            "p.json: stages: an op-level plan (with op_groups) has no stages, op_overrides or "
            "grad_sync (expected one of op_groups and stages)");
  EXPECT_EQ(read(R"({"version": 1, "global_batch": 8, "execution_order": "heft",
                     "stages": [{"first_layer": 0, "num_layers": 1,
                                 "replicas": [{"devices": [0], "batch_share": 1}]}]})"),
            "p.json: execution_order: applies to op-level plans only (expected op_groups)");
  EXPECT_EQ(read(R"({"version": 1, "global_batch": 8,
                     "op_groups": [{"ops": ["a"], "devices": [0], "colour": 1}]})"),
            "p.json: op_groups[0].colour: unknown key (allowed: ops, mode, devices, shares, "
            "replica_sizes, batch_shares, sync, algorithm, servers)");
}

// A tied LM head may sit in another group than its word table on other devices (each holds a
// copy, their gradients summed), not on a device of the table's group.
TEST_F(OpGroups, ATiedHeadAndItsTableShareAGroupOrNoDevice) {
  auto m = model::load_model("gpt:layers=1,hidden=32,heads=2,seq=8,vocab=64");
  ASSERT_TRUE(m);
  model_ = *m;
  plan_.op_groups = {OpGroup{}, OpGroup{}};
  plan_.op_groups[0].ops = {"embedding.*", "layers.*"};
  plan_.op_groups[0].devices = {0, 1};
  plan_.op_groups[1].ops = {"head.*"};
  plan_.op_groups[1].devices = {2};
  plan_.op_groups[1].mode = GroupMode::place;
  EXPECT_EQ(check(), "ok");
  const auto owner = group_of_ops(plan_, model_);
  EXPECT_TRUE(tied_ops_apart(model_, owner));
  EXPECT_FALSE(tied_groups_overlap(plan_, model_, owner));
  // Sharing a device: one table there, which neither group may split.
  plan_.op_groups[1].devices = {1};
  EXPECT_FALSE(tied_groups_overlap(plan_, model_, owner));
  EXPECT_EQ(check(), "ok");
  plan_.op_groups[1].devices = {1, 2};
  plan_.op_groups[1].mode = GroupMode::split;
  EXPECT_EQ(tied_groups_overlap(plan_, model_, owner), 1);
  EXPECT_EQ(check(),
            "plan.json: op_groups: the tied LM head \"head.lm_head\" (op_groups[1]) and the table "
            "it reads \"embedding.word\" (op_groups[0]) share device 1, and one of them is split "
            "(expected one group, groups on disjoint devices, or groups that are not split or "
            "laid out alike: a device holds one table, whole or its vocabulary rows, and the "
            "copies sum their gradients)");
  // Both split alike: each device holds the same rows of the table for both.
  plan_.op_groups[0].mode = GroupMode::split;
  plan_.op_groups[1].devices = {0, 1};
  EXPECT_FALSE(tied_groups_overlap(plan_, model_, owner));
  EXPECT_EQ(check(), "ok");
}

}  // namespace
}  // namespace hetplan::plan
