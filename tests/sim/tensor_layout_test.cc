// Tensor layouts inside a tensor-parallel replica, the collectives between them, and ops split by
// batch (HAP-style SPMD): exact times on small cases.
#include "hetplan/sim/tensor_layout.h"

#include <gtest/gtest.h>

#include "hetplan/cost/memory_cost.h"
#include "hetplan/model/zoo.h"
#include "hetplan/sim/layer_costs.h"
#include "sim_fixtures.h"

namespace hetplan::sim {
namespace {

using testing::chain_model;
using testing::collective_time;
using testing::exact_options;
using testing::unit_cluster;
using C = cost::Collective;
using L = Layout;

// Two samples in one micro-batch on one replica of devices 0 and 1, every op of a two-layer model
// split as `split` says.
plan::Plan every_op_split(plan::SplitKind split) {
  plan::Plan p;
  p.global_batch = 2;
  p.num_microbatches = 1;
  p.op_overrides = {plan::OpOverride{"*", split}};
  p.stages.push_back(plan::Stage{0, 2, {plan::Replica{{0, 1}, {}, 1.0}}});
  return p;
}

TEST(TensorLayout, Conversions) {
  EXPECT_EQ(conversion(L::partial, L::replicated), C::all_reduce);
  EXPECT_EQ(conversion(L::partial, L::sequence), C::reduce_scatter);
  EXPECT_EQ(conversion(L::partial, L::batch), C::reduce_scatter);
  EXPECT_EQ(conversion(L::feature, L::replicated), C::all_gather);
  EXPECT_EQ(conversion(L::batch, L::replicated), C::all_gather);
  EXPECT_EQ(conversion(L::feature, L::batch), C::all_to_all);
  EXPECT_EQ(conversion(L::sequence, L::batch), C::all_to_all);
  EXPECT_FALSE(conversion(L::replicated, L::batch));  // a local slice
  EXPECT_FALSE(conversion(L::replicated, L::feature));
  EXPECT_FALSE(conversion(L::batch, L::batch));
  EXPECT_EQ(gradient_layout(L::partial), L::replicated);
  EXPECT_EQ(gradient_layout(L::batch), L::batch);
}

TEST(TensorLayout, MegatronSplitsAndOverrides) {
  model::Op op;
  op.shard = model::ShardKind::column;
  auto l = op_layout(op, plan::SplitKind::tensor, false);
  EXPECT_EQ(l.input, L::replicated);
  EXPECT_EQ(l.output, L::feature);
  EXPECT_EQ(l.input_grad, L::partial);
  op.shard = model::ShardKind::row;
  l = op_layout(op, plan::SplitKind::tensor, false);
  EXPECT_EQ(l.input, L::feature);
  EXPECT_EQ(l.output, L::partial);
  op.shard = model::ShardKind::replicated;
  EXPECT_EQ(op_layout(op, plan::SplitKind::tensor, true).input, L::sequence);
  EXPECT_EQ(op_layout(op, plan::SplitKind::batch, false).output, L::batch);
  op.shard = model::ShardKind::row;
  EXPECT_EQ(op_layout(op, plan::SplitKind::replicate, false).output, L::replicated);
  // Row output (partial) into a sequence-parallel norm: reduce-scatter; its gradient back: none
  // needed in the forward direction's dual (sequence -> replicated is an all-gather).
  EXPECT_EQ(conversion(L::partial, L::sequence), C::reduce_scatter);
  EXPECT_EQ(conversion(L::sequence, gradient_layout(L::partial)), C::all_gather);
}

// Two column-split layers on two devices of one node: the second reads a replicated input, so
// the first's feature shards are all-gathered forward and its partial input gradient is
// reduce-scattered back. 1 TFLOP per sample at 1 TFLOP/s, half each: 0.5 s per sample.
TEST(TensorLayout, ColumnAfterColumnGathersAndScatters) {
  const auto m = chain_model(2, 1e12, 1e9);
  const auto c = unit_cluster(1, 2);
  plan::Plan settings;
  LayerCosts costs(m, c, settings, exact_options());
  const plan::Replica r{{0, 1}, {}, 1.0};
  const auto t = costs.replica(r, 2.0, 1);
  auto price = [&](C kind) { return collective_time(c, kind, {0, 1}, 2e9); };  // 1 GB x 2
  EXPECT_DOUBLE_EQ(t.forward[0], 1.0);
  EXPECT_DOUBLE_EQ(t.forward[1], 1.0 + price(C::all_gather));
  EXPECT_DOUBLE_EQ(t.backward[1], 2.0 + price(C::reduce_scatter));
  EXPECT_DOUBLE_EQ(t.backward[0], 2.0);
}

// Uneven shards (3:1): the plan's uneven_collectives picks the all-gather's form; auto takes the
// cheaper of the two.
TEST(TensorLayout, ThePlanChoosesPaddedOrGroupedCollectives) {
  const auto m = chain_model(2, 1e12, 1e9);
  const auto c = unit_cluster(1, 2);
  const plan::Replica r{{0, 1}, {0.75, 0.25}, 1.0};
  auto gather = [&](cost::UnevenForm form) {
    return collective_time(c, C::all_gather, {0, 1}, 2e9, {0.75, 0.25}, form);
  };
  auto forward_comm = [&](plan::UnevenCollectives u) {
    plan::Plan settings;
    settings.uneven_collectives = u;
    LayerCosts costs(m, c, settings, exact_options());
    const auto t = costs.replica(r, 2.0, 1);
    return t.forward[1] - t.forward[0];  // the same compute; the second layer gathers
  };
  const double padded = gather(cost::UnevenForm::padded);
  const double grouped = gather(cost::UnevenForm::grouped);
  EXPECT_NE(padded, grouped);
  EXPECT_NEAR(forward_comm(plan::UnevenCollectives::padded), padded, 1e-12);
  EXPECT_NEAR(forward_comm(plan::UnevenCollectives::grouped), grouped, 1e-12);
  EXPECT_NEAR(forward_comm(plan::UnevenCollectives::automatic), std::min(padded, grouped), 1e-12);
}

// The tensor-parallel collectives run as transfers after their pass's compute, on the same links
// as every other transfer. Two data-parallel replicas of two devices each on one node; two
// column-split layers of 1 TFLOP per sample and 1e9 parameters, each its own gradient bucket; two
// micro-batches of one sample per replica. The first micro-batch's collectives have the links to
// themselves and take exactly their price; in the last backward pass, the second layer's
// reduce-scatter shares device links with its gradient bucket's all-reduce and takes longer.
TEST(TensorLayout, TensorParallelCollectivesShareLinksWithGradientSync) {
  const auto m = chain_model(2, 1e12, 1e9, 1'000'000'000);
  const auto c = unit_cluster(1, 4);
  plan::Plan p;
  p.global_batch = 4;
  p.num_microbatches = 2;
  p.grad_bucket_bytes = 1;
  p.stages.push_back(
      plan::Stage{0, 2, {plan::Replica{{0, 1}, {}, 0.5}, plan::Replica{{2, 3}, {}, 0.5}}});
  const auto opts = exact_options();
  auto r = simulate(m, c, p, opts);
  ASSERT_TRUE(r) << r.error().message;
  // One sample's 1 GB activation.
  auto price = [&](C kind) { return collective_time(c, kind, {0, 1}, 1e9); };
  double forward_compute = -1, forward_comm = -1, first_backward_comm = -1, last_backward_comm = -1;
  int tp_comms = 0;
  for (const auto& e : r->events) {
    if (e.lane != 0) continue;
    const double d = (e.end - e.start).value;
    if (e.kind == TaskKind::forward && e.microbatch == 0) forward_compute = d;
    if (e.kind != TaskKind::tp_comm) continue;
    ++tp_comms;
    if (e.microbatch == 0 && e.bucket < 0 && forward_comm < 0) {
      forward_comm = d;  // the forward pass's comes first on the lane
    } else if (e.microbatch == 0) {
      first_backward_comm = d;
    } else if (e.bucket == 0) {
      last_backward_comm = d;
    }
  }
  // Per micro-batch: one forward and one backward transfer (the first layer's backward needs no
  // conversion: its input arrives whole).
  EXPECT_EQ(tp_comms, 4);
  EXPECT_DOUBLE_EQ(forward_compute, 1.0);  // two layers at half a TFLOP each per device
  EXPECT_NEAR(forward_comm, price(C::all_gather), 1e-12);
  EXPECT_NEAR(first_backward_comm, price(C::reduce_scatter), 1e-12);
  EXPECT_GT(last_backward_comm, first_backward_comm * 1.2);
  // Lane 0's devices spend the collectives communicating, not computing.
  EXPECT_GT(r->devices[0].comm_busy.value, 2 * (forward_comm + first_backward_comm) - 1e-9);
}

// Every op split by batch over two devices: each device runs its sample alone (no tensor-parallel
// collectives), holds the whole weights, and the replica all-reduces their gradients before the
// optimizer step.
TEST(TensorLayout, BatchSplitRunsDataParallelInsideTheReplica) {
  const auto m = chain_model(2, 1e12, 1e9, 1'000'000'000);
  const auto c = unit_cluster(1, 2);
  plan::Plan p = every_op_split(plan::SplitKind::batch);
  const auto opts = exact_options();
  LayerCosts costs(m, c, p, opts);
  const auto t = costs.replica(p.stages[0].replicas[0], 2.0, 1);
  EXPECT_DOUBLE_EQ(t.forward[0], 1.0);
  EXPECT_DOUBLE_EQ(t.forward[1], 1.0);
  EXPECT_DOUBLE_EQ(t.backward[1], 2.0);

  auto r = simulate(m, c, p, opts);
  ASSERT_TRUE(r) << r.error().message;
  // Two layers of 1e9 bf16 gradients.
  const double allreduce = collective_time(c, C::all_reduce, {0, 1}, 2 * 2e9);
  double optimizer = 0;
  for (const auto& e : r->events)
    if (e.kind == TaskKind::optimizer) optimizer = (e.end - e.start).value;
  EXPECT_GT(optimizer, 0);
  EXPECT_NEAR(r->iteration_time.value, 6.0 + allreduce + optimizer, 1e-9);

  // Memory: whole weights (2 + 2 + 12 bytes per parameter of both layers) on each device.
  const auto cfg = memory_config(m, p, 0, 2, p.stages[0].replicas[0], 0, 1, 2.0, 1);
  const auto mem = cost::stage_memory(m, cfg);
  EXPECT_DOUBLE_EQ(mem.parameters.value, 2.0 * 2e9);
  EXPECT_DOUBLE_EQ(mem.optimizer.value, 12.0 * 2e9);
  plan::Plan tensor = p;
  tensor.op_overrides.clear();
  const auto half =
      cost::stage_memory(m, memory_config(m, tensor, 0, 2, p.stages[0].replicas[0], 0, 1, 2.0, 1));
  EXPECT_DOUBLE_EQ(half.parameters.value, 2.0 * 1e9);
}

// The same split with the weights sharded over the replica (HAP's parameter sharding): each pass
// all-gathers the layer's 2 GB of bf16 weights first, the backward pass also reduce-scatters their
// gradients; each device holds half the weights, gradients and optimizer states; no all-reduce
// inside the replica.
TEST(TensorLayout, BatchShardedGathersWeightsAndHoldsHalf) {
  const auto m = chain_model(2, 1e12, 1e9, 1'000'000'000);
  const auto c = unit_cluster(1, 2);
  plan::Plan p = every_op_split(plan::SplitKind::batch_sharded);
  const auto opts = exact_options();
  auto price = [&](C kind) { return collective_time(c, kind, {0, 1}, 2e9); };
  LayerCosts costs(m, c, p, opts);
  const auto t = costs.replica(p.stages[0].replicas[0], 2.0, 1);
  EXPECT_NEAR(t.forward[0], 1.0 + price(C::all_gather), 1e-12);
  EXPECT_NEAR(t.backward[1], 2.0 + price(C::all_gather) + price(C::reduce_scatter), 1e-12);

  auto r = simulate(m, c, p, opts);
  ASSERT_TRUE(r) << r.error().message;
  int gradient_syncs = 0;
  for (const auto& e : r->events) gradient_syncs += e.kind == TaskKind::grad_sync;
  EXPECT_EQ(gradient_syncs, 0);
  const auto cfg = memory_config(m, p, 0, 2, p.stages[0].replicas[0], 0, 1, 2.0, 1);
  const auto mem = cost::stage_memory(m, cfg);
  EXPECT_DOUBLE_EQ(mem.parameters.value, 2.0 * 1e9);  // half of 2 x 1e9 bf16 weights
  EXPECT_DOUBLE_EQ(mem.optimizer.value, 12.0 * 1e9);
  // While a layer runs, the other half of its weights and of its gradient are held too.
  EXPECT_DOUBLE_EQ(mem.buffers.value, cfg.gradient_buckets.value + 2.0 * 1e9);

  // Recomputed (the layers as convolution blocks, which full recomputation reruns), the backward
  // pass gathers the weights once (for the recomputed forward) and reduce-scatters the gradients.
  p.recompute = cost::Recompute::full;
  auto blocks = m;
  for (auto& layer : blocks.layers) layer.kind = model::LayerKind::conv_block;
  LayerCosts again(blocks, c, p, opts);
  const auto tr = again.replica(p.stages[0].replicas[0], 2.0, 1);
  EXPECT_NEAR(tr.backward[1], 2.0 + tr.forward[1] + price(C::reduce_scatter), 1e-12);
}

// Full recomputation keeps each layer's input: a device of a replica that splits every op by batch
// keeps its own samples' (the samples of one device alone), not the replica's micro-batch of
// them. (Before 2026-12-02 it was charged the whole micro-batch's: ZeRO-3 over 32 single-device
// replicas of Llama-3 70B, run as one such replica, came to 334 GiB of activations, not 24.)
TEST(TensorLayout, ABatchSplitDeviceRecomputesFromItsOwnSamplesInputs) {
  auto m = model::load_model("gpt:layers=2,hidden=64,heads=4,seq=32,vocab=256");
  ASSERT_TRUE(m) << m.error().message;
  for (const auto split : {plan::SplitKind::batch, plan::SplitKind::batch_sharded}) {
    plan::Plan p = every_op_split(split);
    p.stages[0].num_layers = static_cast<int>(m->layers.size());
    p.recompute = cost::Recompute::full;
    const plan::Replica& pair = p.stages[0].replicas[0];
    const auto both =
        cost::stage_memory(*m, memory_config(*m, p, 0, p.stages[0].num_layers, pair, 0, 1, 2.0, 1));
    plan::Plan alone = p;  // one device with one sample: what each device of the pair computes
    alone.op_overrides.clear();
    alone.stages[0].replicas = {plan::Replica{{0}, {}, 1.0}};
    const auto one =
        cost::stage_memory(*m, memory_config(*m, alone, 0, p.stages[0].num_layers,
                                             alone.stages[0].replicas[0], 0, 1, 1.0, 1));
    EXPECT_GT(one.activations.value, 0);
    EXPECT_DOUBLE_EQ(both.activations.value, one.activations.value) << plan::to_string(split);
  }
}

TEST(TensorLayout, ATiedHeadSplitByBatchGathersAVocabularySplitTable) {
  // HAP's batch program with the word embedding split by vocabulary: the tied LM head, split by
  // batch, reads the whole table, gathered for each pass and its gradient reduce-scattered, as
  // the runtime runs it. With the embedding split by batch too, every rank holds the table.
  auto m = model::load_model("gpt:layers=1,hidden=64,heads=4,seq=16,vocab=128");
  ASSERT_TRUE(m) << m.error().message;
  const int head = static_cast<int>(m->layers.size()) - 1;
  std::int64_t tied = 0;
  for (const auto& op : m->ops) tied += op.tied_params;
  ASSERT_EQ(tied, 128 * 64);
  const auto c = unit_cluster(1, 2);
  plan::Plan vocab_split;
  vocab_split.global_batch = 2;
  vocab_split.num_microbatches = 1;
  vocab_split.op_overrides = {plan::OpOverride{"embedding.word", plan::SplitKind::tensor},
                              plan::OpOverride{"*", plan::SplitKind::batch}};
  vocab_split.stages.push_back(
      plan::Stage{0, static_cast<int>(m->layers.size()), {plan::Replica{{0, 1}, {}, 1.0}}});
  plan::Plan whole = vocab_split;
  whole.op_overrides = {plan::OpOverride{"*", plan::SplitKind::batch}};
  const auto opts = exact_options();
  const auto a =
      LayerCosts(*m, c, vocab_split, opts).replica(vocab_split.stages[0].replicas[0], 2.0, 1);
  const auto b = LayerCosts(*m, c, whole, opts).replica(whole.stages[0].replicas[0], 2.0, 1);
  const double bytes = static_cast<double>(tied) * model::dtype_bytes(m->dtype);
  auto price = [&](C kind) { return collective_time(c, kind, {0, 1}, bytes); };
  EXPECT_NEAR(a.forward[head] - b.forward[head], price(C::all_gather), 1e-12);
  EXPECT_NEAR(a.backward[head] - b.backward[head], price(C::all_gather) + price(C::reduce_scatter),
              1e-12);
}

}  // namespace
}  // namespace hetplan::sim
