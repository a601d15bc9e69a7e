// The estimator's pipeline replay on cases worked by hand.
#include "hetplan/search/estimate.h"

#include <gtest/gtest.h>

#include <random>

#include "hetplan/sim/schedule_order.h"

namespace hetplan::search {
namespace {

// Two stages, two micro-batches, forward 1 and 2 s, backward 2 and 4 s, 0.5 s transfers.
// Stage 0 (1F1B order F0 F1 B0 B1): F0 0-1, F1 1-2. Stage 1 (F0 B0 F1 B1): F0 1.5-3.5,
// B0 3.5-7.5, F1 7.5-9.5, B1 9.5-13.5. Gradients reach stage 0 at 8 and 14: B0 8-10, B1 14-16.
TEST(PipelineFinishTimes, OneFOneBWaitsForTheGradients) {
  EXPECT_EQ(pipeline_finish_times(plan::Schedule::one_f_one_b, 2, {1, 2}, {2, 4}, {0.5, 0}),
            (std::vector<double>{16, 13.5}));
}

// GPipe (stage 1: F0 F1 B0 B1): F0 1.5-3.5, F1 3.5-5.5, B0 5.5-9.5, B1 9.5-13.5; stage 0's
// backward passes start when the gradients arrive, at 10 and 14.
TEST(PipelineFinishTimes, GPipeRunsEveryForwardFirst) {
  EXPECT_EQ(pipeline_finish_times(plan::Schedule::gpipe, 2, {1, 2}, {2, 4}, {0.5, 0}),
            (std::vector<double>{16, 13.5}));
  // Three micro-batches: stage 1 runs F0 1.5-3.5, F1 3.5-5.5, F2 5.5-7.5 (its activations there
  // at 3.5), B0 7.5-11.5, B1 -15.5, B2 -19.5; stage 0's B2 starts when its gradient lands at 20.
  EXPECT_EQ(pipeline_finish_times(plan::Schedule::gpipe, 3, {1, 2}, {2, 4}, {0.5, 0}),
            (std::vector<double>{22, 19.5}));
}

// A slow boundary (3 s a transfer, compute 1 s a pass) carries one transfer at a time each way:
// activations arrive at 4 and 7, gradients leave stage 1 at 6 and 9 and arrive at 9 and 12.
TEST(PipelineFinishTimes, ABoundaryCarriesOneTransferAtATime) {
  EXPECT_EQ(pipeline_finish_times(plan::Schedule::one_f_one_b, 2, {1, 1}, {1, 1}, {3, 0}),
            (std::vector<double>{13, 9}));
}

TEST(PipelineFinishTimes, OneStageRunsItsPassesBackToBack) {
  EXPECT_EQ(pipeline_finish_times(plan::Schedule::one_f_one_b, 4, {1}, {2}, {0}),
            (std::vector<double>{12}));
}

// The replay works out GPipe's and 1F1B's pass order in place. A plain replay of the order
// sim::pass_order lists (each pass starts when its stage is free and its input has arrived; one
// transfer at a time per boundary and direction) must give the same finish times, on random
// stages.
TEST(PipelineFinishTimes, RunsThePassesInTheSimulatorsOrder) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> time(0.1, 3.0);
  for (int trial = 0; trial < 200; ++trial) {
    const int S = 1 + static_cast<int>(rng() % 6), M = 1 + static_cast<int>(rng() % 9);
    std::vector<double> fwd(S), bwd(S), boundary(S, 0);
    for (int s = 0; s < S; ++s) {
      fwd[s] = time(rng);
      bwd[s] = time(rng);
      if (s + 1 < S) boundary[s] = time(rng) / 2;
    }
    for (auto schedule : {plan::Schedule::gpipe, plan::Schedule::one_f_one_b}) {
      std::vector<std::vector<sim::PassRef>> order(S);
      for (int s = 0; s < S; ++s) order[s] = sim::pass_order(schedule, 1, s, S, M);
      std::vector<double> clock(S, 0), down(S, 0), up(S, 0);
      std::vector<std::vector<double>> act(S, std::vector<double>(M, -1)), grad = act;
      for (int k = 0; k < M; ++k) act[0][k] = 0;
      std::vector<std::size_t> next(S, 0);
      for (bool moved = true; moved;) {
        moved = false;
        for (int s = 0; s < S; ++s)
          while (next[s] < order[s].size()) {
            const auto p = order[s][next[s]];
            const double ready = p.forward ? act[s][p.microbatch] : grad[s][p.microbatch];
            if (ready < 0) break;
            clock[s] = std::max(clock[s], ready) + (p.forward ? fwd[s] : bwd[s]);
            if (p.forward && s + 1 == S) {
              grad[s][p.microbatch] = clock[s];
            } else if (p.forward) {
              down[s] = std::max(down[s], clock[s]) + boundary[s];
              act[s + 1][p.microbatch] = down[s];
            } else if (s > 0) {
              up[s - 1] = std::max(up[s - 1], clock[s]) + boundary[s - 1];
              grad[s - 1][p.microbatch] = up[s - 1];
            }
            ++next[s];
            moved = true;
          }
      }
      EXPECT_EQ(pipeline_finish_times(schedule, M, fwd, bwd, boundary), clock)
          << "trial " << trial << ", S " << S << ", M " << M;
    }
  }
}

}  // namespace
}  // namespace hetplan::search
