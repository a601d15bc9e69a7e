// Evaluator::stop_past / stop_as: past the deadline, once a plan has been judged ok, simulations
// stop where they are (Evaluation::stopped, not cached); before it, or with no plan yet, they run.
#include <gtest/gtest.h>

#include <thread>

#include "hetplan/search/evaluate.h"
#include "search_fixtures.h"

namespace hetplan::search {
namespace {

using testing::plan_of;

TEST(EvaluatorStop, PastTheDeadlineWithAPlanInHandSimulationsStopAndAreNotCached) {
  const auto m = testing::load_model_or_die("gpt3-125m");
  const auto c = testing::load_cluster_or_die("dgx-a100:1");
  const plan::Plan a = plan_of("dp=8,tp=1,pp=1,mbs=4,gbs=64", m, c);
  const plan::Plan b = plan_of("dp=4,tp=2,pp=1,mbs=4,gbs=64", m, c);
  const plan::Plan d = plan_of("dp=2,tp=2,pp=2,mbs=4,gbs=64", m, c);
  SearchOptions opts;
  const Deadline passed(1e-9);
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(passed.expired());

  // Without a deadline nothing stops.
  Evaluator plain(m, c, opts);
  EXPECT_TRUE(plain.evaluate(a).ok);
  EXPECT_TRUE(plain.evaluate(b).ok);

  Evaluator ev(m, c, opts);
  ev.stop_past(passed);
  // No plan yet: the first runs to its end, however late.
  const Evaluation first = ev.evaluate(a);
  EXPECT_TRUE(first.ok);
  EXPECT_FALSE(first.stopped);
  // With one in hand, the next stops, says why, and is not remembered as simulated.
  const Evaluation second = ev.evaluate(b);
  EXPECT_FALSE(second.ok);
  EXPECT_TRUE(second.stopped);
  EXPECT_EQ(second.error, "stopped: the time limit passed during its simulation");
  EXPECT_EQ(ev.simulated(), 1);
  // A cached verdict is still given.
  EXPECT_TRUE(ev.evaluate(a).ok);

  // Before the deadline nothing stops.
  const Deadline later(3600);
  Evaluator patient(m, c, opts);
  patient.stop_past(later);
  EXPECT_TRUE(patient.evaluate(a).ok);
  EXPECT_TRUE(patient.evaluate(b).ok);

  // Another evaluator under `ev`'s rule stops from its first simulation (ev holds a plan), and
  // what it judges ok does not count as ev's: one with no plan yet lets it run.
  Evaluator follower(m, c, opts);
  follower.stop_as(ev);
  EXPECT_TRUE(follower.evaluate(d).stopped);
  Evaluator empty(m, c, opts);
  empty.stop_past(passed);
  Evaluator leader_less(m, c, opts);
  leader_less.stop_as(empty);
  EXPECT_TRUE(leader_less.evaluate(d).ok);
  EXPECT_TRUE(leader_less.evaluate(b).ok);
  EXPECT_TRUE(empty.evaluate(d).ok);  // its own first plan still runs
}

}  // namespace
}  // namespace hetplan::search
