// Exact simulated times on cases small enough to work out by hand.
#include <gtest/gtest.h>

#include <algorithm>

#include "hetplan/cost/collective_cost.h"
#include "hetplan/model/zoo.h"
#include "sim_fixtures.h"

namespace hetplan::sim {
namespace {

using testing::chain_model;
using testing::collective_time;
using testing::exact_options;
using testing::unit_cluster;

plan::Plan one_stage_plan(int layers, std::vector<plan::Replica> replicas, int gbs, int mbs_count) {
  plan::Plan p;
  p.global_batch = gbs;
  p.num_microbatches = mbs_count;
  p.stages.push_back(plan::Stage{0, layers, std::move(replicas)});
  return p;
}

TEST(SimulateExact, SingleDeviceGPipe) {
  // 2 layers of 1 TFLOP per sample on a 1 TFLOP/s device: forward 1 s per layer and sample,
  // backward 2 s. Two micro-batches of one sample: 2 * (2 + 4) = 12 s.
  const auto m = chain_model(2, 1e12, 0);
  const auto c = unit_cluster(1, 1);
  auto p = one_stage_plan(2, {plan::Replica{{0}, {}, 1.0}}, 2, 2);
  p.schedule = plan::Schedule::gpipe;
  auto r = simulate(m, c, p, exact_options());
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_DOUBLE_EQ(r->iteration_time.value, 12.0);
  EXPECT_DOUBLE_EQ(r->devices[0].compute_busy.value, 12.0);
  EXPECT_DOUBLE_EQ(r->samples_per_s, 2.0 / 12.0);
}

TEST(SimulateExact, FusedAttentionCoreAtTheKernelsEfficiency) {
  // Layer 1 is an attention core's batched GEMM of 1 TFLOP per sample. Plain: forward 1 s,
  // backward 2 s, as layer 0's. Fused (flash) on a device of unknown architecture (efficiency
  // 0.5, the chain is not causal): forward 1 / 0.5 = 2 s, backward 2.5 / 0.5 = 5 s.
  auto m = chain_model(2, 1e12, 0);
  m.ops[1].kind = model::OpKind::batched_matmul;
  m.ops[1].attention_core = true;
  const auto c = unit_cluster(1, 1);
  auto p = one_stage_plan(2, {plan::Replica{{0}, {}, 1.0}}, 1, 1);
  auto plain = simulate(m, c, p, exact_options());
  ASSERT_TRUE(plain) << plain.error().message;
  EXPECT_DOUBLE_EQ(plain->iteration_time.value, 6.0);
  p.attention = cost::Attention::flash;
  auto flash = simulate(m, c, p, exact_options());
  ASSERT_TRUE(flash) << flash.error().message;
  EXPECT_DOUBLE_EQ(flash->iteration_time.value, 1 + 2 + 2 + 5);
}

TEST(SimulateExact, APassWaitsForTheHostToIssueItsOps) {
  // The host takes 1.5 s to issue an op of a forward pass and 1 s of a backward pass; each layer's
  // kernels take 1 s forward and 2 s backward. Forward: the host's 1.5 s per layer; backward: the
  // kernels' 2 s. One sample over 2 layers: 2 * (1.5 + 2) = 7 s.
  auto m = chain_model(2, 1e12, 0);
  for (auto& layer : m.layers) layer.kind = model::LayerKind::conv_block;  // recomputed whole
  const auto c = unit_cluster(1, 1);
  auto p = one_stage_plan(2, {plan::Replica{{0}, {}, 1.0}}, 1, 1);
  SimOptions o = exact_options();
  o.compute.host_forward_op = Seconds(1.5);
  o.compute.host_backward_op = Seconds(1);
  auto r = simulate(m, c, p, o);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_DOUBLE_EQ(r->iteration_time.value, 7.0);
  // Recomputed layers issue their forward ops again in the backward pass: 1.5 + 2 more there.
  p.recompute = cost::Recompute::full;
  r = simulate(m, c, p, o);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_DOUBLE_EQ(r->iteration_time.value, 2 * (1.5 + 1.5 + 2));
  // Two samples per pass: the kernels outlast the host in both passes, 2 * (2 + 4) = 12 s.
  p.recompute = cost::Recompute::none;
  p.global_batch = 2;
  r = simulate(m, c, p, o);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_DOUBLE_EQ(r->iteration_time.value, 12.0);
  // A CPU worker runs its ops where it issues them: no wait on top.
  auto cpu = unit_cluster(1, 1);
  cpu.device_types[0].architecture = cluster::Architecture::cpu;
  p.global_batch = 1;
  r = simulate(m, cpu, p, o);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_DOUBLE_EQ(r->iteration_time.value, 6.0);
}

TEST(SimulateExact, TheHostsTimeBetweenStepsEndsEachIteration) {
  // Two layers, forward 1 s and backward 2 s each, on two devices of one replica each (data
  // parallelism, no parameters: no sync): 6 s, then 0.5 s of the host's loop.
  const auto m = chain_model(2, 1e12, 0);
  const auto c = unit_cluster(1, 2);
  auto p = one_stage_plan(2, {plan::Replica{{0}, {}, 0.5}, plan::Replica{{1}, {}, 0.5}}, 2, 1);
  SimOptions o = exact_options();
  o.compute.iteration_host = Seconds(0.5);
  auto r = simulate(m, c, p, o);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_DOUBLE_EQ(r->iteration_time.value, 6.5);
  EXPECT_DOUBLE_EQ(r->devices[0].idle.value, 0.5);
  // Two stages of a layer each, one sample: 1 + 1 + 2 + 2 s through the pipeline, then the same
  // 0.5 s once.
  plan::Plan pp;
  pp.global_batch = 1;
  pp.num_microbatches = 1;
  pp.stages.push_back(plan::Stage{0, 1, {plan::Replica{{0}, {}, 1.0}}});
  pp.stages.push_back(plan::Stage{1, 1, {plan::Replica{{1}, {}, 1.0}}});
  r = simulate(m, c, pp, o);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_DOUBLE_EQ(r->iteration_time.value, 6.5);
  // CPU workers run their loop where they run their ops: nothing between steps.
  auto cpu = unit_cluster(1, 2);
  for (auto& t : cpu.device_types) t.architecture = cluster::Architecture::cpu;
  r = simulate(m, cpu, p, o);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_DOUBLE_EQ(r->iteration_time.value, 6.0);
}

TEST(SimulateExact, TheAdamStepTakesItsFormsTime) {
  // Two layers of 1e10 parameters (one tensor each) on a 1 TFLOP/s device with 1 TB/s of memory:
  // forward 1 s and backward 2 s per layer for one sample, then each layer's step. Fused: 30
  // bytes per parameter, 0.3 s; foreach: 88 bytes, 0.88 s; tensor by tensor, where the host
  // takes 0.1 s per op: its eleven ops (1.1 s) outlast the kernels.
  const auto m = chain_model(2, 1e12, 0, 10'000'000'000);
  const auto c = unit_cluster(1, 1);
  auto p = one_stage_plan(2, {plan::Replica{{0}, {}, 1.0}}, 1, 1);
  SimOptions o = exact_options();
  o.compute.host_forward_op = Seconds(0.1);
  const auto iteration = [&](cost::AdamKernels k) {
    p.adam = k;
    auto r = simulate(m, c, p, o);
    EXPECT_TRUE(r) << r.error().message;
    return r ? r->iteration_time.value : 0.0;
  };
  EXPECT_NEAR(iteration(cost::AdamKernels::fused), 6 + 2 * 0.3, 1e-12);
  EXPECT_NEAR(iteration(cost::AdamKernels::foreach), 6 + 2 * 0.88, 1e-12);
  EXPECT_NEAR(iteration(cost::AdamKernels::per_tensor), 6 + 2 * 1.1, 1e-12);
}

TEST(SimulateExact, ZeroSpreadsTheTensorsALoopOverTensorsVisits) {
  // Two layernorm layers of 1e10 parameters in two tensors (scale and shift), over two replicas
  // under ZeRO-1: each replica steps one tensor of half the parameters per layer. Tensor by tensor
  // that is its eleven host ops (1.1 s); foreach streams 88 x 5e9 bytes at 1 TB/s (0.44 s). The
  // rest of the iteration is the same: 2 x (1.1 - 0.44) s between them.
  auto m = chain_model(2, 1e12, 0, 10'000'000'000);
  for (auto& op : m.ops) op.kind = model::OpKind::layernorm;
  const auto c = unit_cluster(1, 2);
  auto p = one_stage_plan(2, {plan::Replica{{0}, {}, 0.5}, plan::Replica{{1}, {}, 0.5}}, 2, 1);
  p.zero_stage = 1;
  SimOptions o = exact_options();
  o.compute.host_forward_op = Seconds(0.1);
  const auto iteration = [&](cost::AdamKernels k) {
    p.adam = k;
    auto r = simulate(m, c, p, o);
    EXPECT_TRUE(r) << r.error().message;
    return r ? r->iteration_time.value : 0.0;
  };
  EXPECT_NEAR(iteration(cost::AdamKernels::per_tensor) - iteration(cost::AdamKernels::foreach),
              2 * (1.1 - 0.44), 1e-9);
}

TEST(SimulateExact, AFusedLossMovesItsLogitsOnceEachWay) {
  // A loss over 1e12 bf16 logits per sample on a device of 1 TB/s: unfused, 18 bytes per logit
  // forward and 26 backward (44 s); fused, 2 and 4 (6 s). Fused, it keeps its logits (2 bytes
  // each) where unfused keeps their fp32 log-softmax (4).
  model::Model m;
  m.name = "loss";
  m.family = model::Family::cnn;
  model::Op loss;
  loss.name = "head.loss";
  loss.kind = model::OpKind::cross_entropy;
  loss.bytes_read = 2e12;
  loss.saved_bytes = 4e12;
  m.ops.push_back(loss);
  m.layers.push_back(model::Layer{"head", model::LayerKind::head, 0, 1});
  auto c = unit_cluster(1, 1);
  c.device_types[0].memory = Bytes(100e12);
  auto p = one_stage_plan(1, {plan::Replica{{0}, {}, 1.0}}, 1, 1);
  auto unfused = simulate(m, c, p, exact_options());
  ASSERT_TRUE(unfused) << unfused.error().message;
  EXPECT_NEAR(unfused->iteration_time.value, 44.0, 1e-9);
  p.loss = cost::Loss::fused;
  auto fused = simulate(m, c, p, exact_options());
  ASSERT_TRUE(fused) << fused.error().message;
  EXPECT_NEAR(fused->iteration_time.value, 6.0, 1e-9);
  EXPECT_NEAR(
      unfused->devices[0].memory.activations.value - fused->devices[0].memory.activations.value,
      2e12, 1e3);
  // Training metrics (Composer's two) each take the unfused forward pass again: 2 x 18 s more,
  // whichever form the loss itself takes.
  p.metrics = 2;
  auto with_metrics = simulate(m, c, p, exact_options());
  ASSERT_TRUE(with_metrics) << with_metrics.error().message;
  EXPECT_NEAR(with_metrics->iteration_time.value, 6.0 + 36.0, 1e-9);
  p.loss = cost::Loss::unfused;
  with_metrics = simulate(m, c, p, exact_options());
  ASSERT_TRUE(with_metrics) << with_metrics.error().message;
  EXPECT_NEAR(with_metrics->iteration_time.value, 44.0 + 36.0, 1e-9);
}

TEST(SimulateExact, CpuShareSlowsItsNodesCompute) {
  // The same device at half its node's CPU, always busy: half of each 0.1 s period computes, so
  // the iteration takes twice as long (12 s -> 24 s, to rounding over 240 periods).
  const auto m = chain_model(2, 1e12, 0);
  auto c = unit_cluster(1, 1);
  c.nodes[0].cpu_share = 0.5;
  auto p = one_stage_plan(2, {plan::Replica{{0}, {}, 1.0}}, 2, 2);
  p.schedule = plan::Schedule::gpipe;
  auto r = simulate(m, c, p, exact_options());
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_NEAR(r->iteration_time.value, 24.0, 1e-9);
}

TEST(SimulateExact, TwoStageOneFOneBTrace) {
  // Stage 0 on node 0, stage 1 on node 1. Forward 1 s, backward 2 s per stage and micro-batch;
  // each boundary transfer moves 0.5 GB over a 1 GB/s NIC path: 0.5 s + path latency L.
  const auto m = chain_model(2, 1e12, 0.5e9);
  const auto c = unit_cluster(2, 1);
  plan::Plan p;
  p.global_batch = 2;
  p.num_microbatches = 2;
  p.stages.push_back(plan::Stage{0, 1, {plan::Replica{{0}, {}, 1.0}}});
  p.stages.push_back(plan::Stage{1, 1, {plan::Replica{{1}, {}, 1.0}}});
  auto r = simulate(m, c, p, exact_options());
  ASSERT_TRUE(r) << r.error().message;
  const double L = c.path_latency(0, 1).value;
  // Worked out in the comment of pass_order: stage 0 runs F0 F1 B0 B1, stage 1 F0 B0 F1 B1.
  EXPECT_NEAR(r->iteration_time.value, 10.0 + 2 * L, 1e-12);
  // Stage 1's first forward starts when the activation arrives.
  bool found = false;
  for (const auto& e : r->events)
    if (e.kind == TaskKind::forward && e.stage == 1 && e.microbatch == 0) {
      EXPECT_NEAR(e.start.value, 1.5 + L, 1e-12);
      found = true;
    }
  EXPECT_TRUE(found);
  // Device 0 is idle when neither computing (F0 F1 at [0, 2], B0 at [5 + 2L, 7 + 2L], B1 at
  // [8 + 2L, 10 + 2L]) nor sending or receiving (its activations at [1, 1.5 + L] and
  // [2, 2.5 + L], the gradients at [4.5 + L, 5 + 2L] and [7.5 + L, 8 + 2L]): busy 7.5 + 3L.
  EXPECT_NEAR(r->devices[0].compute_busy.value, 6.0, 1e-12);
  EXPECT_NEAR(r->devices[0].comm_busy.value, 2.0 + 4 * L, 1e-12);
  EXPECT_NEAR(r->devices[0].idle.value, r->iteration_time.value - (7.5 + 3 * L), 1e-12);
}

TEST(SimulateExact, DataParallelWaitsForGradientAllReduce) {
  // Two replicas on two nodes, one sample each, one layer with 1e9 parameters (2 GB of bf16
  // gradients): forward 1 s + backward 2 s, then the all-reduce the cost model prices, then an
  // optimizer step.
  const auto m = chain_model(1, 1e12, 0, 1'000'000'000);
  const auto c = unit_cluster(2, 1);
  auto p = one_stage_plan(1, {plan::Replica{{0}, {}, 0.5}, plan::Replica{{1}, {}, 0.5}}, 2, 1);
  const auto opts = exact_options();
  auto r = simulate(m, c, p, opts);
  ASSERT_TRUE(r) << r.error().message;
  const double allreduce = collective_time(c, cost::Collective::all_reduce, {0, 1}, 2e9);
  double optimizer = 0;
  for (const auto& e : r->events)
    if (e.kind == TaskKind::optimizer) optimizer = (e.end - e.start).value;
  EXPECT_GT(optimizer, 0);
  EXPECT_NEAR(r->iteration_time.value, 3.0 + allreduce + optimizer, 1e-9);
  // The all-reduce is both replicas' communication, though lowered on the first one's lane; neither
  // device is ever idle: it computes or all-reduces the whole iteration.
  for (int d : {0, 1}) {
    EXPECT_NEAR(r->devices[d].comm_busy.value, allreduce, 1e-9) << "device " << d;
    EXPECT_NEAR(r->devices[d].idle.value, 0.0, 1e-9) << "device " << d;
  }
}

TEST(SimulateExact, ATiedHeadOnTheLastStageSumsItsTableWithTheFirst) {
  // GPT with a tied LM head, the embedding on stage 0 (node 0), the head on stage 1 (node 1): once
  // both stages have finished their backward passes, the two copies of the 256 x 64 table sum
  // their gradients (one all-reduce over the two devices), and only then does either stage step.
  auto m = model::load_model("gpt:layers=2,hidden=64,heads=4,seq=32,vocab=256", "test");
  ASSERT_TRUE(m) << m.error().message;
  const int L = static_cast<int>(m->layers.size());
  const auto c = unit_cluster(2, 1);
  plan::Plan p;
  p.global_batch = 2;
  p.num_microbatches = 2;
  p.stages.push_back(plan::Stage{0, 2, {plan::Replica{{0}, {}, 1.0}}});
  p.stages.push_back(plan::Stage{2, L - 2, {plan::Replica{{1}, {}, 1.0}}});
  auto r = simulate(*m, c, p, exact_options());
  ASSERT_TRUE(r) << r.error().message;
  double tied_start = -1, tied_end = -1, last_backward = 0, first_step = 1e300;
  int tied = 0;
  for (const auto& e : r->events) {
    if (e.kind == TaskKind::grad_sync) {
      ++tied;
      tied_start = e.start.value;
      tied_end = e.end.value;
    }
    if (e.kind == TaskKind::backward) last_backward = std::max(last_backward, e.end.value);
    if (e.kind == TaskKind::optimizer) first_step = std::min(first_step, e.start.value);
  }
  ASSERT_EQ(tied, 1);  // one replica per stage: no other gradient sync
  EXPECT_NEAR(tied_end - tied_start,
              collective_time(c, cost::Collective::all_reduce, {0, 1},
                              256.0 * 64 * model::dtype_bytes(m->dtype)),
              1e-12);
  EXPECT_GE(tied_start, last_backward);
  EXPECT_GE(first_step, tied_end);
}

TEST(SimulateExact, TransfersSharingALinkShareItsBandwidth) {
  // Two replicas per stage; stage 0 on node 0, stage 1 on node 1; both boundary transfers leave
  // node 0 through its single NIC, so each takes twice as long as alone.
  const auto m = chain_model(2, 1e12, 0.5e9);
  const auto c = unit_cluster(2, 2);
  auto make = [](int replicas) {
    plan::Plan p;
    p.global_batch = replicas;
    p.num_microbatches = 1;
    plan::Stage s0{0, 1, {}}, s1{1, 1, {}};
    for (int r = 0; r < replicas; ++r) {
      s0.replicas.push_back(plan::Replica{{r}, {}, 1.0 / replicas});
      s1.replicas.push_back(plan::Replica{{2 + r}, {}, 1.0 / replicas});
    }
    p.stages = {s0, s1};
    return p;
  };
  auto first_transfer = [&](const SimResult& res) {
    for (const auto& e : res.events)
      if (e.kind == TaskKind::p2p && e.stage == 0) return (e.end - e.start).value;
    return -1.0;
  };
  const auto opts = exact_options();
  auto one = simulate(m, c, make(1), opts);
  auto two = simulate(m, c, make(2), opts);
  ASSERT_TRUE(one && two);
  const double L = c.path_latency(0, 2).value;
  EXPECT_NEAR(first_transfer(*one) - L, 0.5, 1e-12);
  EXPECT_NEAR(first_transfer(*two) - L, 1.0, 1e-12);
}

// Summed durations of the events of `kind`.
double total(const SimResult& r, TaskKind kind) {
  double s = 0;
  for (const auto& e : r.events)
    if (e.kind == kind) s += (e.end - e.start).value;
  return s;
}

TEST(SimulateExact, OverlappedTensorParallelCollectivesHideBehindCompute) {
  // One stage of 2 column-parallel layers over a tensor-parallel pair, one micro-batch. Without
  // overlap each pass computes, then runs its collectives: C_f + K_f + C_b + K_b + step. With
  // overlap tp the collectives run beside the compute: max(C_f, K_f) + max(C_b, K_b) + step.
  const auto m = chain_model(2, 1e12, 4e9);
  const auto c = unit_cluster(1, 2);
  auto p = one_stage_plan(2, {plan::Replica{{0, 1}, {}, 1.0}}, 1, 1);
  auto opts = exact_options();
  opts.record_events = true;
  auto plain = simulate(m, c, p, opts);
  ASSERT_TRUE(plain) << plain.error().message;
  std::vector<double> compute, comm;  // forward then backward
  for (const auto& e : plain->events) {
    if (e.kind == TaskKind::forward || e.kind == TaskKind::backward)
      compute.push_back((e.end - e.start).value);
    if (e.kind == TaskKind::tp_comm) comm.push_back((e.end - e.start).value);
  }
  ASSERT_EQ(compute.size(), 2u);
  ASSERT_EQ(comm.size(), 2u);
  const double step = total(*plain, TaskKind::optimizer);
  EXPECT_NEAR(plain->iteration_time.value, compute[0] + comm[0] + compute[1] + comm[1] + step,
              1e-12);
  p.overlap = plan::Overlap::tp;
  auto overlapped = simulate(m, c, p, opts);
  ASSERT_TRUE(overlapped) << overlapped.error().message;
  EXPECT_NEAR(overlapped->iteration_time.value,
              std::max(compute[0], comm[0]) + std::max(compute[1], comm[1]) + step, 1e-12);
  EXPECT_LT(overlapped->iteration_time.value, plain->iteration_time.value);
  // The same collectives, only hidden.
  EXPECT_NEAR(total(*overlapped, TaskKind::tp_comm), comm[0] + comm[1], 1e-12);
}

TEST(SimulateExact, OverlappedParameterGatherHidesBehindTheFirstForwardPass) {
  // Two replicas under ZeRO-1, one micro-batch each, one layer of 1e9 parameters (2 GB in bf16).
  // Without overlap: forward 1 s, backward 2 s, the reduce-scatter, the step, then the gather of
  // the updated shards (AG). With overlap param the previous iteration's gather runs beside the
  // forward pass, and the backward pass waits for it: max(1, AG) + 2 + RS + step.
  const auto m = testing::chain_model(1, 1e12, 0, 1'000'000'000);
  const auto c = testing::unit_cluster(2, 1);
  auto p = one_stage_plan(1, {plan::Replica{{0}, {}, 0.5}, plan::Replica{{1}, {}, 0.5}}, 2, 1);
  p.zero_stage = 1;
  auto opts = exact_options();
  opts.record_events = true;
  const double AG = collective_time(c, cost::Collective::all_gather, {0, 1}, 2e9);
  const double RS = collective_time(c, cost::Collective::reduce_scatter, {0, 1}, 2e9);
  ASSERT_GT(AG, 1.0);  // longer than the forward pass: partly exposed
  auto plain = simulate(m, c, p, opts);
  ASSERT_TRUE(plain) << plain.error().message;
  const double step = total(*plain, TaskKind::optimizer) / 2;  // one per replica, in parallel
  EXPECT_NEAR(plain->iteration_time.value, 1 + 2 + RS + step + AG, 1e-9);
  p.overlap = plan::Overlap::param;
  auto overlapped = simulate(m, c, p, opts);
  ASSERT_TRUE(overlapped) << overlapped.error().message;
  EXPECT_NEAR(overlapped->iteration_time.value, std::max(1.0, AG) + 2 + RS + step, 1e-9);
}

TEST(SimulateExact, ZeroTwoReduceScattersEveryMicroBatchsGradients) {
  // Two replicas, two micro-batches of a sample each, one layer of 1e9 parameters (2 GB in bf16):
  // F0 [0, 1], B0 [1, 3], F1 [3, 4], B1 [4, 6]. ZeRO-1 reduce-scatters the summed gradients once
  // after B1; ZeRO-2, which keeps only a slice of them, each micro-batch's: the first's from 3
  // beside F1 and B1, the second's once both B1 and the first are done. Then the step and the
  // gather of the updated shards.
  const auto m = testing::chain_model(1, 1e12, 0, 1'000'000'000);
  const auto c = testing::unit_cluster(2, 1);
  auto p = one_stage_plan(1, {plan::Replica{{0}, {}, 0.5}, plan::Replica{{1}, {}, 0.5}}, 4, 2);
  auto opts = exact_options();
  opts.record_events = true;
  const double AG = collective_time(c, cost::Collective::all_gather, {0, 1}, 2e9);
  const double RS = collective_time(c, cost::Collective::reduce_scatter, {0, 1}, 2e9);
  p.zero_stage = 1;
  auto one = simulate(m, c, p, opts);
  ASSERT_TRUE(one) << one.error().message;
  const double step = total(*one, TaskKind::optimizer) / 2;  // one per replica, in parallel
  EXPECT_NEAR(one->iteration_time.value, 6 + RS + step + AG, 1e-9);
  p.zero_stage = 2;
  auto two = simulate(m, c, p, opts);
  ASSERT_TRUE(two) << two.error().message;
  std::vector<double> starts;
  for (const auto& e : two->events)
    if (e.kind == TaskKind::grad_sync) starts.push_back(e.start.value);
  std::sort(starts.begin(), starts.end());
  ASSERT_EQ(starts.size(), 2u);
  EXPECT_NEAR(starts[0], 3, 1e-9);
  EXPECT_NEAR(starts[1], std::max(6.0, 3 + RS), 1e-9);
  EXPECT_NEAR(two->iteration_time.value, std::max(6.0, 3 + RS) + RS + step + AG, 1e-9);
}

}  // namespace
}  // namespace hetplan::sim

namespace hetplan::sim {
namespace {

TEST(SimulateExact, ZeroThreeGathersParametersBeforeEachPass) {
  // Two replicas, one micro-batch, one layer of 1e9 parameters (2 GB in bf16). The forward waits
  // for the first gather (G); the backward's gather is prefetched right after it; then the
  // gradients are reduce-scattered and each replica updates its half.
  const auto m = testing::chain_model(1, 1e12, 0, 1'000'000'000);
  const auto c = testing::unit_cluster(2, 1);
  plan::Plan p;
  p.global_batch = 2;
  p.num_microbatches = 1;
  p.zero_stage = 3;
  p.stages.push_back(plan::Stage{0, 1, {plan::Replica{{0}, {}, 0.5}, plan::Replica{{1}, {}, 0.5}}});
  const auto opts = testing::exact_options();
  auto r = simulate(m, c, p, opts);
  ASSERT_TRUE(r) << r.error().message;
  auto cost_of = [&](cost::Collective kind) {
    return testing::collective_time(c, kind, {0, 1}, 2e9);
  };
  const double G = cost_of(cost::Collective::all_gather);
  const double RS = cost_of(cost::Collective::reduce_scatter);
  double optimizer = 0;
  int gathers = 0;
  for (const auto& e : r->events) {
    if (e.kind == TaskKind::optimizer) optimizer = (e.end - e.start).value;
    gathers += e.kind == TaskKind::param_gather;
  }
  EXPECT_EQ(gathers, 2);
  EXPECT_NEAR(r->iteration_time.value, std::max(G + 1.0, 2 * G) + 2.0 + RS + optimizer, 1e-9);
}

TEST(SimulateExact, SyncedBatchNormAllReducesItsStatisticsInEachPass) {
  // Layer 1 is a batch normalisation of 32 channels (64 parameters). Two replicas split each
  // micro-batch: synced, each forward pass all-reduces 2 x 32 + 1 sums and each backward pass
  // 2 x 32, in 8 bytes each, on the critical path; local, nothing. (No gradient synchronisation,
  // whose flow would overlap the backward pass's: the simulator runs a pass's collectives after
  // its compute, where the runtime's sum the gradients before the layer below runs.)
  auto m = chain_model(2, 1e12, 0);
  m.ops[1].kind = model::OpKind::batchnorm;
  m.ops[1].shard = model::ShardKind::replicated;
  m.ops[1].flops = 0;
  m.ops[1].bytes_written = 1e9;
  m.ops[1].params = 64;
  const auto c = unit_cluster(2, 1);
  auto p = one_stage_plan(2, {plan::Replica{{0}, {}, 0.5}, plan::Replica{{1}, {}, 0.5}}, 2, 1);
  p.grad_sync = {plan::GradSync{"*", plan::SyncMethod::none}};
  auto local = simulate(m, c, p, exact_options());
  ASSERT_TRUE(local) << local.error().message;
  p.batch_norm = plan::BatchNormStats::synced;
  auto synced = simulate(m, c, p, exact_options());
  ASSERT_TRUE(synced) << synced.error().message;
  const double stats = collective_time(c, cost::Collective::all_reduce, {0, 1}, 8 * 65);
  const double sums = collective_time(c, cost::Collective::all_reduce, {0, 1}, 8 * 64);
  EXPECT_GT(stats, 0);
  EXPECT_NEAR(synced->iteration_time.value - local->iteration_time.value, stats + sums, 1e-12);
}

}  // namespace
}  // namespace hetplan::sim
