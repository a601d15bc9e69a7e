// A plan's devices under other ids (a subcluster's plan in the whole cluster's ids).
#include "hetplan/plan/renumber.h"

#include <gtest/gtest.h>

namespace hetplan::plan {
namespace {

TEST(Renumber, EveryDeviceIdOfStagesAndOpGroups) {
  Plan p;
  p.global_batch = 8;
  p.stages.push_back(Stage{0, 2, {Replica{{0, 1}, {}, 0.5}, Replica{{2, 3}, {}, 0.5}}});
  OpGroup g;
  g.devices = {1, 3};
  g.servers = {3};
  p.op_groups.push_back(g);
  const Plan q = renumber_devices(p, {0, 2, 5, 7});
  EXPECT_EQ(q.stages[0].replicas[0].devices, (std::vector<int>{0, 2}));
  EXPECT_EQ(q.stages[0].replicas[1].devices, (std::vector<int>{5, 7}));
  EXPECT_EQ(q.op_groups[0].devices, (std::vector<int>{2, 7}));
  EXPECT_EQ(q.op_groups[0].servers, (std::vector<int>{7}));
  EXPECT_EQ(q.global_batch, 8);
}

}  // namespace
}  // namespace hetplan::plan
