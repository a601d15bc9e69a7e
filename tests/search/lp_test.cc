#include "hetplan/search/lp.h"

#include <gtest/gtest.h>

namespace hetplan::search {
namespace {

// max 3x + 2y s.t. x + y <= 4, x + 3y <= 6, 0 <= x <= 3: optimum x = 3, y = 1, value 11.
LpRequest small_lp() {
  LpRequest r;
  r.maximize = true;
  const int x = r.add_variable({"x", 0, 3, 3, false});
  const int y = r.add_variable({"y", 0, kInf, 2, false});
  r.add_row({"a", {{x, 1}, {y, 1}}, -kInf, 4});
  r.add_row({"b", {{x, 1}, {y, 3}}, -kInf, 6});
  return r;
}

TEST(Lp, SolvesASmallLinearProgramExactly) {
  auto res = solve_checked(small_lp());
  ASSERT_TRUE(res) << res.error().message;
  EXPECT_NEAR(res->objective, 11, 1e-9);
  EXPECT_NEAR(res->values[0], 3, 1e-9);
  EXPECT_NEAR(res->values[1], 1, 1e-9);
}

TEST(Lp, SolvesAKnapsackAsAMixedIntegerProgram) {
  // Items (weight, value): (5, 10), (4, 40), (6, 30), (3, 50); capacity 10. Best: items 2 and 4.
  LpRequest r;
  r.maximize = true;
  const double w[] = {5, 4, 6, 3}, v[] = {10, 40, 30, 50};
  LpRow cap{"capacity", {}, -kInf, 10};
  for (int i = 0; i < 4; ++i) {
    r.add_variable({"take" + std::to_string(i), 0, 1, v[i], true});
    cap.terms.push_back({i, w[i]});
  }
  r.add_row(cap);
  auto res = solve_checked(r);
  ASSERT_TRUE(res) << res.error().message;
  EXPECT_NEAR(res->objective, 90, 1e-9);
  EXPECT_EQ(res->values, (std::vector<double>{0, 1, 0, 1}));
}

// Jeroslow's program, its values a little apart so that the objective is not integral (GLPK
// rounds an integral bound): max sum (1 + i / 1000) x_i s.t. sum 2 x_i <= 41 over 41 binary x.
// Every relaxation along the way takes half an item more than any integer solution, so proving
// the best one takes branch and bound exponentially many nodes. With a node limit it stops with
// the best solution it has found, which checks.
TEST(Lp, ANodeLimitStopsBranchAndCutWithItsBestSolution) {
  LpRequest r;
  r.maximize = true;
  LpRow cap{"capacity", {}, -kInf, 41};
  for (int i = 0; i < 41; ++i) {
    r.add_variable({"x" + std::to_string(i), 0, 1, 1 + i / 1000.0, true});
    cap.terms.push_back({i, 2});
  }
  r.add_row(cap);
  r.node_limit = 200;
  const LpResult res = solve_lp(r);
  ASSERT_EQ(res.status, LpStatus::limited) << res.message;
  EXPECT_GE(res.objective, 20);                                       // 20 items
  EXPECT_LE(res.objective, 20 + (21 + 40) * 20 / 2 / 1000.0 + 1e-9);  // at most the best 20
  EXPECT_TRUE(check_lp_solution(r, res));
  auto checked = solve_checked(r);
  ASSERT_TRUE(checked) << checked.error().message;
  EXPECT_EQ(checked->status, LpStatus::limited);
}

TEST(Lp, ReportsInfeasibleAndUnbounded) {
  LpRequest inf;
  const int x = inf.add_variable({"x", 0, 1, 1, false});
  inf.add_row({"too much", {{x, 1}}, 2, kInf});
  EXPECT_EQ(solve_lp(inf).status, LpStatus::infeasible);
  EXPECT_FALSE(solve_checked(inf));

  LpRequest unb;
  unb.maximize = true;
  unb.add_variable({"x", 0, kInf, 1, false});
  EXPECT_EQ(solve_lp(unb).status, LpStatus::unbounded);
}

TEST(Lp, TheCheckerCatchesWrongSolutions) {
  const LpRequest r = small_lp();
  LpResult good = solve_lp(r);
  ASSERT_TRUE(check_lp_solution(r, good));

  LpResult row_broken = good;
  row_broken.values = {3, 2};  // x + y = 5 > 4
  row_broken.objective = 13;
  auto e1 = check_lp_solution(r, row_broken);
  ASSERT_FALSE(e1);
  EXPECT_NE(e1.error().message.find("row a"), std::string::npos) << e1.error().message;

  LpResult bound_broken = good;
  bound_broken.values = {3.5, 0};
  bound_broken.objective = 10.5;
  EXPECT_FALSE(check_lp_solution(r, bound_broken));

  LpResult objective_wrong = good;
  objective_wrong.objective = 12;
  EXPECT_FALSE(check_lp_solution(r, objective_wrong));
}

// The HAP ratio LP of a one-device replica: one share, pinned to 1 by the sum row, and one
// unit's time per share. GLPK's presolver returned z = 0 for it (the row checker caught that).
TEST(Lp, SolvesAProgramThatThePresolverAloneWouldSolveWrongly) {
  LpRequest req;
  const int r = req.add_variable({"r", 0.0, 1.0, 0.0, false});
  const int z = req.add_variable({"z", 0.0, kInf, 1.0, false});
  req.add_row({"sum", {{r, 1.0}}, 1.0, 1.0});
  req.add_row({"unit", {{r, 4.29e-5}, {z, -1.0}}, -kInf, 0.0});
  auto sol = solve_checked(req);
  ASSERT_TRUE(sol) << sol.error().message;
  EXPECT_NEAR(sol->values[r], 1.0, 1e-12);
  EXPECT_NEAR(sol->values[z], 4.29e-5, 1e-12);
}

}  // namespace
}  // namespace hetplan::search
