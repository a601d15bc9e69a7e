// Op-level plans (groups of ops on their own devices), simulated on cases worked out by hand.
#include <gtest/gtest.h>

#include "hetplan/cluster/cluster_file.h"
#include "hetplan/cost/compute_cost.h"
#include "hetplan/model/training.h"
#include "hetplan/model/zoo.h"
#include "hetplan/plan/op_groups.h"
#include "hetplan/plan/strategy.h"
#include "sim_fixtures.h"

namespace hetplan::sim {
namespace {

using testing::chain_model;
using testing::collective_time;
using testing::exact_options;
using testing::unit_cluster;

plan::OpGroup placed(std::vector<std::string> ops, int device) {
  plan::OpGroup g;
  g.ops = std::move(ops);
  g.devices = {device};
  g.mode = plan::GroupMode::place;
  return g;
}

plan::OpGroup replicated(std::vector<std::string> ops, std::vector<int> devices,
                         plan::SyncMethod sync = plan::SyncMethod::all_reduce) {
  plan::OpGroup g;
  g.ops = std::move(ops);
  g.devices = std::move(devices);
  g.sync = sync;
  return g;
}

plan::Plan op_plan(std::vector<plan::OpGroup> groups, int batch, int microbatches = 1) {
  plan::Plan p;
  p.global_batch = batch;
  p.num_microbatches = microbatches;
  p.op_groups = std::move(groups);
  return p;
}

// Seconds of the Adam step of model m's first op on device `device` of c over `shard` of its
// weights, as the simulator prices it under `opts`.
double adam_step(const model::Model& m, const cluster::Cluster& c, const SimOptions& opts,
                 int device, double shard) {
  const auto tg = model::derive_training_graph(m);
  const cost::ComputeCostModel cm(opts.compute);
  return cm.op_time(c.type_of(device), tg.optimizer[0], 1, shard, m.dtype).value;
}

// Seconds of the forward (or backward) pass of model m's first op on device 0 of c over `samples`
// at `shard` of its tensor dimension, as the simulator prices it under `opts`.
double pass_time(const model::Model& m, const cluster::Cluster& c, const SimOptions& opts,
                 bool forward, double samples, double shard) {
  const auto tg = model::derive_training_graph(m);
  const cost::ComputeCostModel cm(opts.compute);
  return cm.op_time(c.type_of(0), forward ? tg.forward[0] : tg.backward[0], samples, shard, m.dtype)
      .value;
}

TEST(OpLevel, PlacedChainMovesActivationsBothWays) {
  // Op 0 on device 0, op 1 on device 1 (other nodes): forward 1 s each, backward 2 s each, the
  // 0.5 GB activation over the 1 GB/s NIC path and its gradient back: 0.5 s + L each way.
  const auto m = chain_model(2, 1e12, 0.5e9);
  const auto c = unit_cluster(2, 1);
  const auto p = op_plan({placed({"layers.0.fc"}, 0), placed({"layers.1.fc"}, 1)}, 1);
  auto r = simulate(m, c, p, exact_options());
  ASSERT_TRUE(r) << r.error().message;
  const double L = c.path_latency(0, 1).value;
  EXPECT_NEAR(r->iteration_time.value, 7.0 + 2 * L, 1e-12);
  EXPECT_EQ(r->devices_used, 2);
  EXPECT_NEAR(r->devices[0].compute_busy.value, 3.0, 1e-12);
  EXPECT_NEAR(r->devices[1].comm_busy.value, 1.0 + 2 * L, 1e-12);
  EXPECT_EQ(r->lanes.size(), 2u);
}

TEST(OpLevel, ReplicatedGroupAllReducesThenSteps) {
  // Two devices, a sample each: forward 1 s, backward 2 s, then the all-reduce of the 1e8 bf16
  // weights, then each device's Adam step. Under ZeRO-1 each device keeps Adam's states of half
  // the weights and steps them, then the updated weights are all-gathered.
  const auto m = chain_model(1, 1e12, 0, 100'000'000);
  const auto c = unit_cluster(2, 1);
  const auto opts = exact_options();
  const double ar = collective_time(c, cost::Collective::all_reduce, {0, 1}, 2e8);
  const double ag = collective_time(c, cost::Collective::all_gather, {0, 1}, 2e8);
  for (int zero : {0, 1}) {
    auto p = op_plan({replicated({"*"}, {0, 1})}, 2);
    p.zero_stage = zero;
    auto r = simulate(m, c, p, opts);
    ASSERT_TRUE(r) << r.error().message;
    const double shard = zero ? 0.5 : 1.0;
    const double step = adam_step(m, c, opts, 0, shard);
    EXPECT_NEAR(r->iteration_time.value, 3.0 + ar + step + (zero ? ag : 0.0), 1e-9) << zero;
    // Weights and gradients whole on both devices (2 + 2 bytes per parameter), Adam's states
    // (12 bytes per parameter) whole or halved.
    EXPECT_DOUBLE_EQ(r->devices[1].memory.parameters.value, 2e8) << zero;
    EXPECT_DOUBLE_EQ(r->devices[1].memory.optimizer.value, 12e8 * shard) << zero;
  }
}

TEST(OpLevel, ParameterServerStepsOnTheServerOnly) {
  const auto m = chain_model(1, 1e12, 0, 100'000'000);
  const auto c = unit_cluster(2, 1);
  const auto opts = exact_options();
  auto g = replicated({"*"}, {0, 1}, plan::SyncMethod::parameter_server);
  g.servers = {1};
  auto r = simulate(m, c, op_plan({g}, 2), opts);
  ASSERT_TRUE(r) << r.error().message;
  const double step = adam_step(m, c, opts, 1, 1);
  const double ps = collective_time(c, cost::Collective::ps_push_pull, {1, 0}, 2e8);
  EXPECT_NEAR(r->iteration_time.value, 3.0 + ps + step, 1e-9);
  EXPECT_DOUBLE_EQ(r->devices[0].memory.optimizer.value, 0.0);
  EXPECT_DOUBLE_EQ(r->devices[1].memory.optimizer.value, 12e8);
}

TEST(OpLevel, UnevenSharesMoveOverlappingSamples) {
  // Op 0 replicated over devices 0 and 1 at 3/4 and 1/4 of 4 samples, op 1 placed on device 1:
  // device 0's three samples cross to device 1 (3 x 0.1 GB over 1 GB/s), device 1's stays.
  // Forward: device 0 3 s, then 0.3 s + L; device 1's op 1 on 4 samples 4 s. Backward: op 1 8 s,
  // the gradient back 0.3 s + L, op 0 on device 0 6 s.
  const auto m = chain_model(2, 1e12, 0.1e9);
  const auto c = unit_cluster(2, 1);
  auto g0 = replicated({"layers.0.fc"}, {0, 1});
  g0.shares = {0.75, 0.25};
  const auto p = op_plan({g0, placed({"layers.1.fc"}, 1)}, 4);
  auto r = simulate(m, c, p, exact_options());
  ASSERT_TRUE(r) << r.error().message;
  const double L = c.path_latency(0, 1).value;
  EXPECT_NEAR(r->iteration_time.value, 3 + 0.3 + L + 4 + 8 + 0.3 + L + 6, 1e-9);
}

// A node with a cpu_share runs its devices under that CPU quota, as stage plans do (it was priced
// as a slowdown of every op, which a quota is not: within a period a device idle before may run
// at full speed). A chain of three layers (forward 0.01 s, backward 0.02 s each), layer 0 on
// device 0 and layers 1-2 on device 1 at half a core: device 1 computes 0.06 s an iteration, so
// iterations take at least 0.12 s on average, and less than the 0.15 s of the slowed chain. The
// op-level plan takes the stage plan's steady-state time.
TEST(OpLevel, ACpuShareIsAQuotaAsInStagePlans) {
  const auto m = chain_model(3, 1e10, 0);
  auto c = unit_cluster(2, 1);
  c.nodes[1].cpu_share = 0.5;
  const auto ops = simulate(
      m, c, op_plan({placed({"layers.0.fc"}, 0), placed({"layers.1.fc", "layers.2.fc"}, 1)}, 1),
      exact_options());
  ASSERT_TRUE(ops) << ops.error().message;
  plan::Plan p;
  p.global_batch = 1;
  p.num_microbatches = 1;
  p.stages.push_back(plan::Stage{0, 1, {plan::Replica{{0}, {}, 1.0}}});
  p.stages.push_back(plan::Stage{1, 2, {plan::Replica{{1}, {}, 1.0}}});
  const auto stages = simulate(m, c, p, exact_options());
  ASSERT_TRUE(stages) << stages.error().message;
  EXPECT_NEAR(ops->iteration_time.value, stages->iteration_time.value,
              1e-9 * stages->iteration_time.value);
  EXPECT_GE(ops->iteration_time.value, 0.12 - 1e-9);
  EXPECT_LT(ops->iteration_time.value, 0.15);
}

// CPU workers without a cpu_share share the host's cores where SimOptions::host_cores says how
// many (simulate --host-cores), op by op too: two workers of a replicated chain layer, a sample
// each (0.015 s): 0.015 s on a core each, 0.03 s on one core. GPUs share nothing.
TEST(OpLevel, CpuWorkersShareTheHostsCores) {
  const auto m = chain_model(1, 5e9, 0);
  auto c = unit_cluster(1, 2);
  c.device_types[0].architecture = cluster::Architecture::cpu;
  const auto p = op_plan({replicated({"*"}, {0, 1})}, 2);
  auto o = exact_options();
  for (const auto& [cores, expected] : {std::pair{0, 0.015}, {1, 0.03}, {2, 0.015}}) {
    o.host_cores = cores;
    auto r = simulate(m, c, p, o);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_NEAR(r->iteration_time.value, expected, 1e-9) << cores << " cores";
  }
  c.device_types[0].architecture = cluster::Architecture::ampere;
  o.host_cores = 1;
  auto r = simulate(m, c, p, o);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_NEAR(r->iteration_time.value, 0.015, 1e-9);
}

// a -> {y, x}, x -> z, {y, z} -> j: every op a matmul of its TFLOPs per sample, nothing moves.
// a, y, x and j on device 0, z on device 1.
model::Model fork_model() {
  model::Model m;
  m.name = "fork";
  m.family = model::Family::cnn;
  const std::vector<std::pair<const char*, double>> ops = {
      {"a", 1}, {"y", 4}, {"x", 1}, {"z", 4}, {"j", 1}};
  const std::vector<std::vector<int>> inputs = {{}, {0}, {0}, {2}, {1, 3}};
  for (std::size_t i = 0; i < ops.size(); ++i) {
    model::Op op;
    op.name = ops[i].first;
    op.kind = model::OpKind::matmul;
    op.layer = static_cast<int>(i);
    op.inputs = inputs[i];
    op.flops = ops[i].second * 1e12;
    m.ops.push_back(op);
    m.layers.push_back(model::Layer{op.name, model::LayerKind::other, static_cast<int>(i), 1});
  }
  return m;
}

TEST(OpLevel, HeftRunsTheCriticalBranchFirst) {
  // After a (1 s), device 0 has y (4 s) and x (1 s) ready; y became ready first.
  // FIFO: y [1, 5], x [5, 6], z on device 1 [6, 10], j [10, 11], j's backward [11, 13], y's
  //   backward [13, 21] while z's runs [13, 21]; then x's [21, 23] and a's [23, 25]: 25 s.
  // HEFT: x's rank (x, z, j, j', z', x', a' = 20 s) beats y's (y, j, j', z', x', a' = 19 s): x [1,
  // 2],
  //   z [2, 6] beside y [2, 6], j [6, 7], j' [7, 9], y' [9, 17] beside z' [9, 17], x' [17, 19],
  //   a' [19, 21]: 21 s.
  const auto m = fork_model();
  const auto c = unit_cluster(2, 1);
  auto p = op_plan({placed({"a", "y", "x", "j"}, 0), placed({"z"}, 1)}, 1);
  p.execution_order = plan::ExecutionOrder::fifo;
  auto fifo = simulate(m, c, p, exact_options());
  ASSERT_TRUE(fifo) << fifo.error().message;
  EXPECT_NEAR(fifo->iteration_time.value, 25.0, 1e-12);
  p.execution_order = plan::ExecutionOrder::heft;
  auto heft = simulate(m, c, p, exact_options());
  ASSERT_TRUE(heft) << heft.error().message;
  EXPECT_NEAR(heft->iteration_time.value, 21.0, 1e-12);
  for (const auto& e : heft->events)
    if (e.kind == TaskKind::forward && e.lane == 1) {
      EXPECT_NEAR(e.start.value, 2.0, 1e-12);
    }
}

TEST(OpLevel, GroupsOnTheSameDevicesReceiveAnActivationOnce) {
  // a on device 0 feeds b and c, each its own group placed on device 1: the 0.5 GB activation
  // crosses once (0.5 s + L), b and c run (2 s), their backward passes (4 s), the summed gradient
  // crosses back once (0.5 s + L), a's backward (2 s): 1 + 0.5 + L + 2 + 4 + 0.5 + L + 2.
  model::Model m;
  m.name = "fan-out";
  m.family = model::Family::cnn;
  for (int i = 0; i < 3; ++i) {
    model::Op op;
    op.name = std::string(1, static_cast<char>('a' + i));
    op.kind = model::OpKind::matmul;
    op.layer = i;
    if (i > 0) op.inputs = {0};
    op.flops = 1e12;
    op.bytes_written = i == 0 ? 0.5e9 : 0;
    m.ops.push_back(op);
    m.layers.push_back(model::Layer{op.name, model::LayerKind::other, i, 1});
  }
  const auto c = unit_cluster(2, 1);
  auto r = simulate(m, c, op_plan({placed({"a"}, 0), placed({"b"}, 1), placed({"c"}, 1)}, 1),
                    exact_options());
  ASSERT_TRUE(r) << r.error().message;
  const double L = c.path_latency(0, 1).value;
  EXPECT_NEAR(r->iteration_time.value, 10.0 + 2 * L, 1e-12);
  int transfers = 0;
  for (const auto& e : r->events) transfers += e.kind == TaskKind::p2p;
  EXPECT_EQ(transfers, 2);
}

TEST(OpLevel, ActivationsPeakWhenTheLastForwardEnds) {
  // One device, two ops saving 1 GB and 2 GB per sample, two samples: 6 GB at the peak, plus the
  // working buffers.
  auto m = chain_model(2, 1e12, 0);
  m.ops[0].saved_bytes = 1e9;
  m.ops[1].saved_bytes = 2e9;
  const auto c = unit_cluster(1, 1);
  auto r = simulate(m, c, op_plan({placed({"*"}, 0)}, 2), exact_options());
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_DOUBLE_EQ(r->devices[0].memory.activations.value, 6e9);
  const cost::MemoryConfig defaults;
  EXPECT_DOUBLE_EQ(r->devices[0].memory.buffers.value, defaults.gradient_buckets.value);
  EXPECT_DOUBLE_EQ(r->devices[0].memory.reserve.value,
                   (defaults.context + defaults.workspace).value);
  // The allocator's share of the step's activations and buffers.
  EXPECT_DOUBLE_EQ(r->devices[0].memory.fragmentation.value,
                   defaults.fragmentation * (6e9 + defaults.gradient_buckets.value));
}

// The last op a whole loss of 1e8 logits per sample: its backward pass holds 8 bytes per logit
// (the NLL gradient and log-softmax's fp32 gradient) beside the 6 GB kept, for its two samples.
TEST(OpLevel, TheLossHoldsItsGradientBuffersWhileItsBackwardPassRuns) {
  auto m = chain_model(2, 1e12, 0);
  m.ops[0].saved_bytes = 1e9;
  m.ops[1].saved_bytes = 2e9;
  m.ops[1].kind = model::OpKind::cross_entropy;
  m.ops[1].bytes_read = model::dtype_bytes(m.dtype) * 1e8;
  const auto c = unit_cluster(1, 1);
  auto r = simulate(m, c, op_plan({placed({"*"}, 0)}, 2), exact_options());
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_DOUBLE_EQ(r->devices[0].memory.activations.value, 6e9);
  EXPECT_DOUBLE_EQ(r->devices[0].memory.transient.value, 2 * 8e8);
  EXPECT_DOUBLE_EQ(r->devices[0].peak_memory.value, r->devices[0].memory.total().value);
}

plan::OpGroup split(std::vector<std::string> ops, std::vector<int> devices,
                    std::vector<double> shares = {}) {
  plan::OpGroup g;
  g.ops = std::move(ops);
  g.devices = std::move(devices);
  g.shares = std::move(shares);
  g.mode = plan::GroupMode::split;
  return g;
}

int count(const SimResult& r, TaskKind kind) {
  int n = 0;
  for (const auto& e : r.events) n += e.kind == kind;
  return n;
}

// Recomputation op by op. One device, two ops of 1 s per sample forward (2 s backward) saving 1 GB
// and 2 GB per sample, the first's output 0.5 GB per sample; two samples: 12 s, 6 GB at the peak.
// Under full recomputation of both (convolution blocks, a segment each) each segment reruns its
// forward pass (2 s) before its backward pass: 16 s; the device holds the second op's saved bytes
// from its rerun on, and its input (the first op's output) from its forward pass: 4 + 1 GB at the
// peak. Under selective recomputation of the second op alone (an attention core): 14 s, and the
// same peak as without (the rerun keeps what the forward pass would have).
TEST(OpLevel, RecomputationRerunsEachSegmentBeforeItsBackwardPass) {
  auto m = chain_model(2, 1e12, 0.5e9);
  m.ops[0].saved_bytes = 1e9;
  m.ops[1].saved_bytes = 2e9;
  for (auto& layer : m.layers) layer.kind = model::LayerKind::conv_block;
  const auto c = unit_cluster(1, 1);
  auto p = op_plan({placed({"*"}, 0)}, 2);
  auto none = simulate(m, c, p, exact_options());
  p.recompute = cost::Recompute::full;
  auto full = simulate(m, c, p, exact_options());
  m.ops[1].attention_core = true;
  p.recompute = cost::Recompute::selective;
  auto selective = simulate(m, c, p, exact_options());
  ASSERT_TRUE(none && full && selective);
  EXPECT_NEAR(none->iteration_time.value, 12.0, 1e-12);
  EXPECT_NEAR(full->iteration_time.value, 16.0, 1e-12);
  EXPECT_NEAR(selective->iteration_time.value, 14.0, 1e-12);
  EXPECT_DOUBLE_EQ(none->devices[0].memory.activations.value, 6e9);
  EXPECT_DOUBLE_EQ(full->devices[0].memory.activations.value, 5e9);
  EXPECT_DOUBLE_EQ(selective->devices[0].memory.activations.value, 6e9);
  EXPECT_EQ(count(*none, TaskKind::recompute), 0);
  EXPECT_EQ(count(*full, TaskKind::recompute), 2);
  EXPECT_EQ(count(*selective, TaskKind::recompute), 1);
}

TEST(OpLevel, SplitGroupShardsComputeWeightsAndOptimizerSteps) {
  // One column-split matmul over two devices at 3/4 and 1/4, two samples (each device runs both):
  // device 0 forward 1.5 s, backward 3 s, then its Adam step over 3/4 of the weights; nothing is
  // synchronised.
  const auto m = chain_model(1, 1e12, 0, 100'000'000);
  const auto c = unit_cluster(1, 2);
  const auto opts = exact_options();
  auto r = simulate(m, c, op_plan({split({"*"}, {0, 1}, {0.75, 0.25})}, 2), opts);
  ASSERT_TRUE(r) << r.error().message;
  const double step = adam_step(m, c, opts, 0, 0.75);
  EXPECT_NEAR(r->iteration_time.value, 4.5 + step, 1e-9);
  EXPECT_NEAR(r->devices[1].compute_busy.value, 1.5 + adam_step(m, c, opts, 1, 0.25), 1e-9);
  EXPECT_EQ(count(*r, TaskKind::grad_sync), 0);
  EXPECT_EQ(count(*r, TaskKind::tp_comm), 0);
  // bf16 weights and gradients, Adam's 12 bytes, each of the device's share.
  EXPECT_DOUBLE_EQ(r->devices[0].memory.parameters.value, 1.5e8);
  EXPECT_DOUBLE_EQ(r->devices[0].memory.optimizer.value, 9e8);
  EXPECT_DOUBLE_EQ(r->devices[1].memory.parameters.value, 0.5e8);
}

TEST(OpLevel, SplitGroupOfReplicasAllReducesEachSliceOverTheReplicas) {
  // The matmul above on two replicas of two devices at 3/4 and 1/4, two samples each: device 0
  // runs 1.5 s forward and 3 s backward, then devices 0 and 2 all-reduce their 3/4 of the bf16
  // gradients (1.5e8 bytes) while 1 and 3 all-reduce their quarter, then each steps its share.
  const auto m = chain_model(1, 1e12, 0, 100'000'000);
  const auto c = unit_cluster(1, 4);
  const auto opts = exact_options();
  auto g = split({"*"}, {0, 1, 2, 3}, {0.75, 0.25, 0.75, 0.25});
  g.replica_sizes = {2, 2};
  auto r = simulate(m, c, op_plan({g}, 4), opts);
  ASSERT_TRUE(r) << r.error().message;
  const double step = adam_step(m, c, opts, 0, 0.75);
  const double ar = collective_time(c, cost::Collective::all_reduce, {0, 2}, 1.5e8);
  EXPECT_NEAR(r->iteration_time.value, 4.5 + ar + step, 1e-9);
  EXPECT_EQ(count(*r, TaskKind::grad_sync), 2);
  EXPECT_DOUBLE_EQ(r->devices[2].memory.parameters.value, 1.5e8);
  EXPECT_DOUBLE_EQ(r->devices[3].memory.optimizer.value, 3e8);
  // Under ZeRO-1 the devices at each place step half of their slices (Adam's states halved) and
  // all-gather them after.
  auto zero = op_plan({g}, 4);
  zero.zero_stage = 1;
  r = simulate(m, c, zero, opts);
  ASSERT_TRUE(r) << r.error().message;
  const double half_step = adam_step(m, c, opts, 0, 0.375);
  const double gather = collective_time(c, cost::Collective::all_gather, {0, 2}, 1.5e8);
  EXPECT_NEAR(r->iteration_time.value, 4.5 + ar + half_step + gather, 1e-9);
  EXPECT_EQ(count(*r, TaskKind::param_gather), 2);
  EXPECT_DOUBLE_EQ(r->devices[3].memory.optimizer.value, 1.5e8);
  // Replicas that split unlike (the second evenly) sum the whole gradients over all four devices,
  // after device 0's 4.5 s (device 2 runs 1 + 2 s).
  g.shares = {0.75, 0.25, 0.5, 0.5};
  r = simulate(m, c, op_plan({g}, 4), opts);
  ASSERT_TRUE(r) << r.error().message;
  const double whole = collective_time(c, cost::Collective::all_reduce, {0, 1, 2, 3}, 2e8);
  EXPECT_NEAR(r->iteration_time.value, 4.5 + whole + step, 1e-9);
  EXPECT_EQ(count(*r, TaskKind::grad_sync), 1);
  // Batch shares 3/4 and 1/4: device 0 runs three samples (2.25 s forward, 4.5 s backward).
  g.batch_shares = {0.75, 0.25};
  r = simulate(m, c, op_plan({g}, 4), opts);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_NEAR(r->iteration_time.value, 6.75 + whole + step, 1e-9);
}

TEST(OpLevel, SplitGroupOfReplicasGathersSufficientFactorsPerPlace) {
  // A wide matmul (k = 20000 inputs, n = 10000 outputs, 4e8 flops a sample) column-split at 3/4
  // and 1/4 on two replicas of two devices, two samples each, its gradient summed by sufficient
  // factors: device 0 runs its forward (0.6 ms) and backward passes; the devices at each place
  // gather their factors for all four samples (each sample's k inputs and the place's slice of
  // the n output gradients); device 0 rebuilds its slice over the other replica's two samples
  // (0.6 ms, its forward pass) and steps its 3/4.
  constexpr std::int64_t k = 20000, n = 10000;
  auto m = chain_model(1, 2.0 * k * n, 0, k * n);
  m.ops[0].gemm = model::GemmShape{1, n, k, 1};
  const auto c = unit_cluster(1, 4);
  const auto opts = exact_options();
  auto g = split({"*"}, {0, 1, 2, 3}, {0.75, 0.25, 0.75, 0.25});
  g.replica_sizes = {2, 2};
  g.sync = plan::SyncMethod::sufficient_factor;
  auto r = simulate(m, c, op_plan({g}, 4), opts);
  ASSERT_TRUE(r) << r.error().message;
  const double value = model::dtype_bytes(m.dtype);
  const double factors = (k + 0.75 * n) * value * 4;
  const double gather =
      collective_time(c, cost::Collective::all_gather, {0, 2}, factors, {0.5, 0.5});
  const double step = adam_step(m, c, opts, 0, 0.75);
  const double backward = pass_time(m, c, opts, false, 2, 0.75);
  EXPECT_NEAR(pass_time(m, c, opts, true, 2, 0.75), 6e-4, 1e-15);
  EXPECT_NEAR(r->iteration_time.value, 6e-4 + backward + gather + 6e-4 + step, 1e-12);
  EXPECT_EQ(count(*r, TaskKind::grad_sync), 2);
  EXPECT_EQ(count(*r, TaskKind::grad_rebuild), 4);
  const cost::MemoryConfig defaults;
  EXPECT_DOUBLE_EQ(r->devices[2].memory.buffers.value, defaults.gradient_buckets.value + factors);
  // Replicas that split unlike (the second evenly): one gather over all four devices, each giving
  // its slice's factors for its replica's two samples.
  g.shares = {0.75, 0.25, 0.5, 0.5};
  r = simulate(m, c, op_plan({g}, 4), opts);
  ASSERT_TRUE(r) << r.error().message;
  std::vector<double> given;
  double total = 0;
  for (double share : g.shares) {
    given.push_back((k + share * n) * value * 2);
    total += given.back();
  }
  for (double& x : given) x /= total;
  const double all = collective_time(c, cost::Collective::all_gather, {0, 1, 2, 3}, total, given);
  EXPECT_NEAR(r->iteration_time.value, 6e-4 + backward + all + 6e-4 + step, 1e-12);
  EXPECT_EQ(count(*r, TaskKind::grad_sync), 1);
  // All-reduced instead, the 3/4 slice's 3e8 bytes cost more than its factors.
  g.sync = plan::SyncMethod::all_reduce;
  g.shares = {0.75, 0.25, 0.75, 0.25};
  r = simulate(m, c, op_plan({g}, 4), opts);
  ASSERT_TRUE(r) << r.error().message;
  const double ar = collective_time(c, cost::Collective::all_reduce, {0, 2}, 0.75 * k * n * value);
  EXPECT_NEAR(r->iteration_time.value, 6e-4 + backward + ar + step, 1e-12);
  EXPECT_GT(ar, gather + 6e-4);
}

TEST(OpLevel, SplitGroupsLaidOutAlikePassActivationsAsOneGroup) {
  // Megatron-LM's MLP (a column-split matmul, then a row-split one) over two replicas of two
  // devices in two groups laid out alike: the same tasks and time as one group of both ops; the
  // second group on other tensor shares pays the exit to replicated and the gathers back.
  auto m = chain_model(2, 1e12, 1e9, 1000);
  m.ops[1].shard = model::ShardKind::row;
  const auto c = unit_cluster(1, 4);
  auto both = split({"*"}, {0, 1, 2, 3});
  both.replica_sizes = {2, 2};
  auto first = both, second = both;
  first.ops = {"layers.0.fc"};
  second.ops = {"layers.1.fc"};
  auto one = simulate(m, c, op_plan({both}, 4), exact_options());
  auto two = simulate(m, c, op_plan({first, second}, 4), exact_options());
  ASSERT_TRUE(one) << one.error().message;
  ASSERT_TRUE(two) << two.error().message;
  EXPECT_NEAR(two->iteration_time.value, one->iteration_time.value, 1e-12);
  EXPECT_EQ(count(*two, TaskKind::tp_comm), count(*one, TaskKind::tp_comm));
  EXPECT_EQ(count(*two, TaskKind::p2p), 0);
  second.shares = {0.75, 0.25, 0.75, 0.25};
  auto apart = simulate(m, c, op_plan({first, second}, 4), exact_options());
  ASSERT_TRUE(apart) << apart.error().message;
  EXPECT_GT(count(*apart, TaskKind::tp_comm), count(*one, TaskKind::tp_comm));
  EXPECT_GT(apart->iteration_time.value, one->iteration_time.value);
}

TEST(OpLevel, SplitGroupAllReducesARowSplitOutputBeforeAWholeOp) {
  // Megatron-LM's MLP on two devices, one sample: a column-split matmul (0.5 s each), a row-split
  // one (0.5 s) whose partial sums are all-reduced (1 GB) before an op computed whole (1 s);
  // backward 2 + 1 + 1 s. The row split's input gradient is already in shards and the first op
  // has no producer: one collective in all.
  auto m = chain_model(3, 1e12, 1e9);
  m.ops[1].shard = model::ShardKind::row;
  m.ops[2].shard = model::ShardKind::replicated;
  const auto c = unit_cluster(1, 2);
  auto r = simulate(m, c, op_plan({split({"*"}, {0, 1})}, 1), exact_options());
  ASSERT_TRUE(r) << r.error().message;
  const double ar = collective_time(c, cost::Collective::all_reduce, {0, 1}, 1e9);
  EXPECT_NEAR(r->iteration_time.value, 6.0 + ar, 1e-9);
  EXPECT_EQ(count(*r, TaskKind::tp_comm), 1);
  // Put back to back inside a whole op's pair, the column split's input gradient is partial and
  // is all-reduced in the backward pass too.
  m.ops[0].shard = model::ShardKind::replicated;
  m.ops[1].shard = model::ShardKind::column;
  m.ops[2].shard = model::ShardKind::replicated;
  r = simulate(m, c, op_plan({split({"*"}, {0, 1})}, 1), exact_options());
  ASSERT_TRUE(r) << r.error().message;
  // Forward 1 + 0.5, the feature shards gathered for the whole op (1 GB), 1; backward 2, the
  // column split's 1 s, its partial input gradient all-reduced, then 2.
  const double ag = collective_time(c, cost::Collective::all_gather, {0, 1}, 1e9);
  EXPECT_NEAR(r->iteration_time.value, 7.5 + ag + ar, 1e-9);
  EXPECT_EQ(count(*r, TaskKind::tp_comm), 2);
}

TEST(OpLevel, ActivationsEnterASplitGroupWholeAndLeaveItReplicated) {
  // Placed op on device 2 -> column-split op over devices 0 and 1 -> placed op on device 2, two
  // micro-batches of one sample: per micro-batch the activation goes whole to both devices and its
  // gradients come back (4 transfers), the split output is gathered to replicated, each device
  // sends its half of the samples on (2) and gets their gradients back (2), which are gathered
  // again on both devices.
  const auto m = chain_model(3, 1e12, 1e9);
  const auto c = unit_cluster(1, 3);
  const auto p = op_plan(
      {placed({"layers.0.fc"}, 2), split({"layers.1.fc"}, {0, 1}), placed({"layers.2.fc"}, 2)}, 2,
      2);
  auto r = simulate(m, c, p, exact_options());
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(count(*r, TaskKind::p2p), 2 * 8);
  EXPECT_EQ(count(*r, TaskKind::tp_comm), 2 * 2);
  for (const auto& e : r->events)
    if (e.kind == TaskKind::forward && e.stage == 1) {
      EXPECT_NEAR((e.end - e.start).value, 0.5, 1e-12);
    }
  // Device 2 is never idle here (the other micro-batch fills its waits): 2 x (1 + 1) s forward, 2 x
  // (2 + 2) s backward. With one micro-batch the split device's 0.5 + 1 s and both gathers (of
  // 1 GB) are on the critical path too.
  EXPECT_NEAR(r->iteration_time.value, 12.0, 1e-9);
  // The host's time between steps ends the iteration, and every device idles through it.
  SimOptions host = exact_options();
  host.compute.iteration_host = Seconds(0.5);
  auto waits = simulate(m, c, p, host);
  ASSERT_TRUE(waits) << waits.error().message;
  EXPECT_NEAR(waits->iteration_time.value, 12.5, 1e-9);
  EXPECT_NEAR(waits->devices[2].idle.value, r->devices[2].idle.value + 0.5, 1e-9);
  r = simulate(m, c, op_plan(p.op_groups, 1, 1), exact_options());
  ASSERT_TRUE(r) << r.error().message;
  const double ag = collective_time(c, cost::Collective::all_gather, {0, 1}, 1e9);
  EXPECT_GT(r->iteration_time.value, 7.5 + 2 * ag);
}

// On a DGX A100 node, GPT-3 125M and VGG-16 (a global batch of 8) under op-level plan `ops` and
// under the stage plan of `strategy`: the iteration times agree within `time_tolerance` and the
// peak memory of `device` within `memory_tolerance` (relative).
void expect_like_stage_plan(const plan::Plan& ops, const char* strategy, int device,
                            double time_tolerance, double memory_tolerance) {
  const auto c = cluster::load_cluster("dgx-a100:1");
  ASSERT_TRUE(c);
  for (const char* spec : {"gpt3-125m", "vgg16"}) {
    const auto m = model::load_model(spec);
    ASSERT_TRUE(m);
    auto st = plan::parse_strategy(strategy);
    ASSERT_TRUE(st);
    auto stage_plan = plan::plan_from_strategy(*st, *m, *c);
    ASSERT_TRUE(stage_plan) << stage_plan.error().message;
    auto tp = simulate(*m, *c, *stage_plan, SimOptions{});
    auto op = simulate(*m, *c, ops, SimOptions{});
    ASSERT_TRUE(tp && op) << spec;
    EXPECT_NEAR(op->iteration_time.value, tp->iteration_time.value,
                time_tolerance * tp->iteration_time.value)
        << spec;
    EXPECT_NEAR(op->devices[device].peak_memory.value, tp->devices[device].peak_memory.value,
                memory_tolerance * tp->devices[device].peak_memory.value)
        << spec;
  }
}

// A split group holding a whole chain-shaped model is that model's tensor-parallel replica: on two
// A100s of a DGX node, GPT-3 125M and VGG-16 (one micro-batch of 8) take the time the stage plan
// with tp=2 takes, and the same memory but for the working buffers' rounding (within 0.1%).
TEST(OpLevel, SplitGroupOfAWholeChainIsTheTensorParallelStagePlan) {
  expect_like_stage_plan(op_plan({split({"*"}, {0, 1})}, 8), "dp=1,tp=2,pp=1,gbs=8,mbs=8", 1, 1e-9,
                         1e-3);
}

// Stepped tensor by tensor (adam=per-tensor), the same plans still take the same time, longer than
// fused steps take.
TEST(OpLevel, AnAdamStepTensorByTensorTakesTheStagePlansTime) {
  auto ops = op_plan({split({"*"}, {0, 1})}, 8);
  ops.adam = cost::AdamKernels::per_tensor;
  expect_like_stage_plan(ops, "dp=1,tp=2,pp=1,gbs=8,mbs=8,adam=per-tensor", 1, 1e-9, 1e-3);
  const auto c = cluster::load_cluster("dgx-a100:1");
  const auto m = model::load_model("gpt3-125m");
  ASSERT_TRUE(c && m);
  auto looped = simulate(*m, *c, ops, SimOptions{});
  ops.adam = cost::AdamKernels::fused;
  auto fused = simulate(*m, *c, ops, SimOptions{});
  ASSERT_TRUE(looped && fused);
  EXPECT_GT(looped->iteration_time.value, fused->iteration_time.value);
}

// A split group of replicas holding a whole chain-shaped model is the stage plan of data-parallel
// tensor-parallel replicas: on four A100s of a DGX node, GPT-3 125M and VGG-16 (dp=2, tp=2, one
// micro-batch of 4 per replica) take the time the stage plan takes within 5% (the same compute
// and about the same communication, overlapped differently: the stage lowering fills gradient
// buckets by layer, the op-level one by op; VGG-16's is 3.9% slower, GPT-3 125M's 0.1% faster)
// and the same memory within 0.2% (the op-level lowering holds GPT's position embedding whole on
// each device, the stage lowering splits it).
TEST(OpLevel, SplitGroupOfReplicasOfAWholeChainIsTheDataAndTensorParallelStagePlan) {
  auto g = split({"*"}, {0, 1, 2, 3});
  g.replica_sizes = {2, 2};
  expect_like_stage_plan(op_plan({g}, 8), "dp=2,tp=2,pp=1,gbs=8,mbs=4", 3, 0.05, 2e-3);
}

// Model `spec`'s stage plan of `strategy` on a DGX A100 node, with `rules`, and its op-level form
// (as_op_level_plan, of `groups` groups), both simulated with their events.
void simulate_both_forms(const char* spec, const char* strategy, std::vector<plan::GradSync> rules,
                         std::size_t groups, SimResult& stage, SimResult& ops) {
  const auto c = cluster::load_cluster("dgx-a100:1");
  const auto m = model::load_model(spec);
  ASSERT_TRUE(c && m);
  auto st = plan::parse_strategy(strategy);
  ASSERT_TRUE(st);
  auto stage_plan = plan::plan_from_strategy(*st, *m, *c);
  ASSERT_TRUE(stage_plan) << stage_plan.error().message;
  stage_plan->grad_sync = std::move(rules);
  const auto op_plan = plan::as_op_level_plan(*stage_plan, *m);
  ASSERT_TRUE(op_plan);
  ASSERT_EQ(op_plan->op_groups.size(), groups);
  SimOptions opts;
  opts.record_events = true;
  auto a = simulate(*m, *c, *stage_plan, opts);
  auto b = simulate(*m, *c, *op_plan, opts);
  ASSERT_TRUE(a) << a.error().message;
  ASSERT_TRUE(b) << b.error().message;
  stage = std::move(*a);
  ops = std::move(*b);
}

// A stage plan of data- and tensor-parallel replicas that sums VGG-16's fully connected layers by
// sufficient factors (TAG's choice) is, op by op, two split groups laid out alike: on four A100s
// of a DGX node (dp=2, tp=2, a micro-batch of 16 per replica) it takes the stage plan's time
// within 2% (10.24 ms against 10.16 ms: the lowerings overlap the gathers differently) and its
// memory within 0.1%.
TEST(OpLevel, SufficientFactorsOfTensorParallelReplicasMatchTheStagePlan) {
  SimResult stage, ops;
  simulate_both_forms("vgg16", "dp=2,tp=2,pp=1,gbs=32,mbs=16",
                      {plan::GradSync{"fc6.fc", plan::SyncMethod::sufficient_factor},
                       plan::GradSync{"fc7.fc", plan::SyncMethod::sufficient_factor}},
                      2, stage, ops);
  if (HasFatalFailure()) return;
  const SimResult* tp = &stage;
  const SimResult* op = &ops;
  EXPECT_NEAR(op->iteration_time.value, tp->iteration_time.value, 0.02 * tp->iteration_time.value);
  EXPECT_NEAR(op->devices[3].peak_memory.value, tp->devices[3].peak_memory.value,
              1e-3 * tp->devices[3].peak_memory.value);
  EXPECT_EQ(count(*op, TaskKind::grad_rebuild), 4);
}

// A tied LM head in another group than its word table holds a copy of it, whose gradient is summed
// with the table's over both groups' devices before either steps: GPT-3 125M in two pipeline
// stages on two A100s of a DGX node (two micro-batches of 4), op by op as the stage plan.
TEST(OpLevel, ATiedHeadApartFromItsTableSumsItsCopysGradient) {
  SimResult stage, ops;
  simulate_both_forms("gpt3-125m", "dp=1,tp=1,pp=2,gbs=8,mbs=4", {}, 2, stage, ops);
  if (HasFatalFailure()) return;
  const SimResult* tp = &stage;
  const SimResult* op = &ops;
  // The same time as the 1F1B stage plan (134.06 ms), the same weights on the head's device and
  // the same peak memory; one gradient sync, the table's.
  EXPECT_NEAR(op->iteration_time.value, tp->iteration_time.value, 1e-6 * tp->iteration_time.value);
  EXPECT_DOUBLE_EQ(op->devices[1].memory.parameters.value, tp->devices[1].memory.parameters.value);
  EXPECT_NEAR(op->devices[1].peak_memory.value, tp->devices[1].peak_memory.value,
              1e-3 * tp->devices[1].peak_memory.value);
  EXPECT_EQ(count(*op, TaskKind::grad_sync), 1);
}

// A stage of one tensor-parallel replica under recomputation is, op by op, a split group whose
// segments rerun (each transformer layer's ops, or its attention cores) with their layout
// conversions: GPT-3 125M on two A100s of a DGX node (tp=2, a micro-batch of 8) takes the stage
// plan's time, and its memory is the stage plan's within 0.5%. Under full recomputation both
// peak as the loss's backward pass starts, its gradient buffers (3.29 GB: 8 bytes per logit, half
// the vocabulary of 8 x 2048 tokens) beside everything kept: 7.20 GB with the 0.70 GB reserve. (The
// rerun of the largest layer comes after the logits are freed: 3.91 GB.)
TEST(OpLevel, RecomputationOfATensorParallelStageMatchesTheStagePlan) {
  for (const char* recompute : {"full", "selective"}) {
    SimResult stage, ops;
    simulate_both_forms("gpt3-125m",
                        (std::string("dp=1,tp=2,pp=1,gbs=8,mbs=8,recompute=") + recompute).c_str(),
                        {}, 1, stage, ops);
    if (HasFatalFailure()) return;
    EXPECT_NEAR(ops.iteration_time.value, stage.iteration_time.value,
                1e-9 * stage.iteration_time.value)
        << recompute;
    const double mine = ops.devices[0].peak_memory.value,
                 theirs = stage.devices[0].peak_memory.value;
    EXPECT_NEAR(mine, theirs, 5e-3 * theirs) << recompute;
    if (std::string(recompute) == "full") {
      EXPECT_NEAR(ops.devices[0].memory.transient.value, 8.0 * 8 * 2048 * 50257 / 2, 1e-6 * mine);
      EXPECT_NEAR(mine, 7.204e9, 1e-3 * 7.204e9) << theirs;
    }
    EXPECT_GT(count(ops, TaskKind::recompute), 0) << recompute;
  }
}

// A model small enough that the host's time per op paces its passes (compute_cost.h): both forms
// still take the same time, under either recomputation (selective reruns fewer ops than a layer).
TEST(OpLevel, AHostBoundStageTakesTheStagePlansTimeOpByOp) {
  for (const char* recompute : {"none", "full", "selective"}) {
    SimResult stage, ops;
    simulate_both_forms("gpt:layers=2,hidden=64,heads=4,seq=16,vocab=128",
                        (std::string("dp=1,tp=2,pp=1,gbs=2,mbs=2,recompute=") + recompute).c_str(),
                        {}, 1, stage, ops);
    if (HasFatalFailure()) return;
    EXPECT_NEAR(ops.iteration_time.value, stage.iteration_time.value,
                1e-9 * stage.iteration_time.value)
        << recompute;
    // The host paces it: 15 us per op of each pass at least.
    EXPECT_GT(stage.iteration_time.value, 2 * 15 * 15e-6) << recompute;
  }
}

// A tied LM head in a group that shares a device with its table's: that device holds one table,
// which both ops read, the others a copy each, and the copies sum their gradients over both groups'
// devices once. GPT-3 125M's word table placed on device 0 of a DGX A100 node, everything else
// replicated over devices 0 and 1: each holds the model's weights once (bf16).
TEST(OpLevel, ATiedHeadSharingADeviceWithItsTableHoldsOneTableThere) {
  const auto c = cluster::load_cluster("dgx-a100:1");
  const auto m = model::load_model("gpt3-125m");
  ASSERT_TRUE(c && m);
  auto p = op_plan({placed({"embedding.word"}, 0), replicated({"*"}, {0, 1})}, 8);
  auto r = simulate(*m, *c, p, exact_options());
  ASSERT_TRUE(r) << r.error().message;
  const double weights = 2.0 * static_cast<double>(m->parameters());
  EXPECT_DOUBLE_EQ(r->devices[0].memory.parameters.value, weights);
  EXPECT_DOUBLE_EQ(r->devices[1].memory.parameters.value, weights);
  int tied_sums = 0;  // the table's one all-reduce, apart from the replicated group's buckets
  for (const auto& e : r->events) tied_sums += e.kind == TaskKind::grad_sync && e.stage == 0;
  EXPECT_EQ(tied_sums, 1);
}

}  // namespace
}  // namespace hetplan::sim
