#include "hetplan/cost/memory_cost.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "hand_built.h"
#include "hetplan/model/zoo.h"

namespace hetplan::cost {
namespace {

using testing::gpt_like;

constexpr int kSeq = 1024, kHidden = 1024, kHeads = 16;
constexpr double s = kSeq, h = kHidden, a = kHeads;

MemoryConfig layers(int n) {
  MemoryConfig cfg;
  cfg.num_layers = n;
  return cfg;
}

double params_per_layer() { return 12 * h * h + 13 * h; }

// fp16: 16 bytes per parameter (Rajbhandari et al.); bf16 keeps fp32 gradients: 18.
TEST(MemoryCost, SixteenBytesPerParameterInFp16AndEighteenInBf16WithoutZero) {
  auto m = gpt_like(2, kSeq, kHidden, kHeads);
  const double P = 2 * params_per_layer();
  const auto bf16 = stage_memory(m, layers(2));
  EXPECT_DOUBLE_EQ(bf16.parameters.value, 2 * P);
  EXPECT_DOUBLE_EQ(bf16.gradients.value, 4 * P);
  EXPECT_DOUBLE_EQ(bf16.optimizer.value, 12 * P);
  m.dtype = model::DType::fp16;
  const auto fp16 = stage_memory(m, layers(2));
  EXPECT_DOUBLE_EQ(fp16.parameters.value, 2 * P);
  EXPECT_DOUBLE_EQ(fp16.gradients.value, 2 * P);
  EXPECT_DOUBLE_EQ(fp16.optimizer.value, 12 * P);
}

TEST(MemoryCost, ZeroStagesSplitOverTheGroupAfterTheTensorShard) {
  const auto m = gpt_like(1, kSeq, kHidden, kHeads);
  const double P = params_per_layer() / 4;  // tp = 4
  const double g = 8;
  for (int stage = 1; stage <= 3; ++stage) {
    MemoryConfig cfg = layers(1);
    cfg.param_shard = 0.25;
    cfg.zero_stage = stage;
    cfg.zero_group = 8;
    const auto mem = stage_memory(m, cfg);
    EXPECT_DOUBLE_EQ(mem.optimizer.value, 12 * P / g) << stage;
    EXPECT_DOUBLE_EQ(mem.gradients.value, stage >= 2 ? 4 * P / g : 4 * P) << stage;
    EXPECT_DOUBLE_EQ(mem.parameters.value, stage >= 3 ? 2 * P / g : 2 * P) << stage;
  }
}

// ZeRO-3 as FSDP runs it: the largest layer's tensor-parallel part gathered whole, the next one
// prefetched, and that layer's whole gradient before its reduce-scatter (in place of the buckets
// when larger), in the buffers. Over a group of one nothing is gathered.
TEST(MemoryCost, ZeroThreeGathersTheLargestLayerAndPrefetchesTheNext) {
  const auto m = gpt_like(2, kSeq, kHidden, kHeads);
  const double P = params_per_layer() / 4;  // tp = 4: each layer's part
  MemoryConfig cfg = layers(2);
  cfg.param_shard = 0.25;
  cfg.zero_stage = 3;
  cfg.zero_group = 8;
  cfg.gradient_buckets = Bytes(0);
  EXPECT_DOUBLE_EQ(stage_memory(m, cfg).buffers.value, 2 * 2 * P + 4 * P);  // bf16, fp32 grads
  cfg.gradient_buckets = Bytes(1e12);  // buckets larger than a layer's gradient
  EXPECT_DOUBLE_EQ(stage_memory(m, cfg).buffers.value, 1e12 + 2 * 2 * P);
  cfg.zero_group = 1;
  EXPECT_DOUBLE_EQ(stage_memory(m, cfg).buffers.value, 1e12);
  cfg.zero_group = 8;
  cfg.zero_stage = 2;
  EXPECT_DOUBLE_EQ(stage_memory(m, cfg).buffers.value, 1e12);
}

TEST(MemoryCost, Fp32ModelsKeepSixteenBytesSplitDifferently) {
  auto m = gpt_like(1, kSeq, kHidden, kHeads);
  m.dtype = model::DType::fp32;
  const auto mem = stage_memory(m, layers(1));
  const double P = params_per_layer();
  EXPECT_DOUBLE_EQ(mem.parameters.value, 4 * P);
  EXPECT_DOUBLE_EQ(mem.gradients.value, 4 * P);
  EXPECT_DOUBLE_EQ(mem.optimizer.value, 8 * P);
}

// Korthikanti et al. 2022, activations per layer of a micro-batch of b sequences.
TEST(MemoryCost, ActivationsWithoutParallelismOrRecompute) {
  const auto m = gpt_like(3, kSeq, kHidden, kHeads);
  MemoryConfig cfg = layers(3);
  cfg.micro_batch = 2;
  const double b = 2;
  EXPECT_DOUBLE_EQ(stage_memory(m, cfg).activations.value, 3 * s * b * h * (34 + 5 * a * s / h));
}

TEST(MemoryCost, ActivationsWithTensorParallelism) {
  const auto m = gpt_like(1, kSeq, kHidden, kHeads);
  const double t = 4, b = 2;
  MemoryConfig cfg = layers(1);
  cfg.micro_batch = b;
  cfg.activation_shard = 1 / t;
  cfg.tensor_parallel = 4;
  EXPECT_DOUBLE_EQ(stage_memory(m, cfg).activations.value,
                   s * b * h * (10 + 24 / t + 5 * a * s / (h * t)));
  cfg.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(stage_memory(m, cfg).activations.value, s * b * h / t * (34 + 5 * a * s / h));
  cfg.recompute = Recompute::selective;
  EXPECT_DOUBLE_EQ(stage_memory(m, cfg).activations.value, s * b * h * 34 / t);
}

TEST(MemoryCost, SelectiveRecomputeWithoutTensorParallelism) {
  const auto m = gpt_like(1, kSeq, kHidden, kHeads);
  MemoryConfig cfg = layers(1);
  cfg.recompute = Recompute::selective;
  EXPECT_DOUBLE_EQ(stage_memory(m, cfg).activations.value, s * h * 34);
}

TEST(MemoryCost, FullRecomputeKeepsLayerInputsPlusOneLayerWorkingSet) {
  const auto m = gpt_like(4, kSeq, kHidden, kHeads);
  MemoryConfig cfg = layers(4);
  cfg.recompute = Recompute::full;
  cfg.micro_batch = 2;
  cfg.inflight_microbatches = 3;
  const double b = 2, L = 4;
  const double inputs = 2 * s * b * h * L * 3;              // 2sbhL per micro-batch in flight
  const double working = s * b * h * (34 + 5 * a * s / h);  // one layer, one micro-batch
  EXPECT_DOUBLE_EQ(stage_memory(m, cfg).activations.value, inputs + working);
  const auto act = stage_activation_bytes(m, cfg);
  EXPECT_DOUBLE_EQ(act.stored_per_sample, 2 * s * h * L);
  // With TP and SP the checkpointed inputs are split too: 2sbhL/t.
  cfg.activation_shard = 0.125;
  cfg.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(stage_activation_bytes(m, cfg).stored_per_sample, 2 * s * h * L / 8);
}

// A fused attention core keeps none of the scores: Korthikanti et al.'s 5as/h term goes, as under
// selective recomputation, and the recomputed layer's working set loses it too.
TEST(MemoryCost, FlashAttentionKeepsNoScores) {
  const auto m = gpt_like(4, kSeq, kHidden, kHeads);
  const double b = 2, t = 4, L = 4;
  MemoryConfig cfg = layers(4);
  cfg.attention = Attention::flash;
  cfg.micro_batch = b;
  EXPECT_DOUBLE_EQ(stage_memory(m, cfg).activations.value, L * s * b * h * 34);
  cfg.activation_shard = 1 / t;
  cfg.tensor_parallel = 4;
  EXPECT_DOUBLE_EQ(stage_memory(m, cfg).activations.value, L * s * b * h * (10 + 24 / t));
  cfg.recompute = Recompute::full;
  cfg.activation_shard = 1;
  EXPECT_DOUBLE_EQ(stage_memory(m, cfg).activations.value, 2 * s * b * h * L + s * b * h * 34);
  // Selective recomputation drops nothing more.
  cfg.recompute = Recompute::selective;
  EXPECT_DOUBLE_EQ(stage_memory(m, cfg).activations.value, L * s * b * h * 34);
  // The first FlashAttention's kernels keep as little: the generations differ in speed alone.
  cfg.attention = Attention::flash1;
  EXPECT_DOUBLE_EQ(stage_memory(m, cfg).activations.value, L * s * b * h * 34);
}

TEST(MemoryCost, InflightMicrobatchesMultiplyActivations) {
  const auto m = gpt_like(2, kSeq, kHidden, kHeads);
  MemoryConfig one = layers(2);
  MemoryConfig many = one;
  many.inflight_microbatches = 4;
  EXPECT_DOUBLE_EQ(stage_memory(m, many).activations.value,
                   4 * stage_memory(m, one).activations.value);
}

TEST(MemoryCost, StageCountsOnlyItsLayers) {
  const auto m = gpt_like(4, kSeq, kHidden, kHeads);
  MemoryConfig cfg;
  cfg.first_layer = 1;
  cfg.num_layers = 2;
  const auto mem = stage_memory(m, cfg);
  EXPECT_DOUBLE_EQ(mem.parameters.value, 2 * 2 * params_per_layer());
  EXPECT_DOUBLE_EQ(mem.activations.value, 2 * s * h * (34 + 5 * a * s / h));
}

// A tied LM head on a pipeline stage without the word embedding keeps its own copy of the table
// (Megatron-LM's, and the runtime's), with its gradient and Adam states, split as the head is.
TEST(MemoryCost, ATiedHeadAwayFromItsTableHoldsACopy) {
  auto m = model::load_model("gpt:layers=2,hidden=64,heads=4,seq=32,vocab=256", "test");
  ASSERT_TRUE(m) << m.error().message;
  const int L = static_cast<int>(m->layers.size());
  const double table = 256.0 * 64, head = static_cast<double>(m->layer_parameters(L - 1));
  MemoryConfig cfg;
  cfg.num_layers = L;  // the whole model: the head reads the embedding's table
  EXPECT_DOUBLE_EQ(stage_memory(*m, cfg).parameters.value,
                   2 * static_cast<double>(m->parameters()));
  cfg.first_layer = L - 1;
  cfg.num_layers = 1;
  EXPECT_DOUBLE_EQ(stage_memory(*m, cfg).parameters.value, 2 * (head + table));  // 16-bit
  EXPECT_DOUBLE_EQ(stage_memory(*m, cfg).optimizer.value, 12 * (head + table));
  cfg.param_shard = 0.5;  // two tensor-parallel ranks: half the vocabulary each
  EXPECT_DOUBLE_EQ(stage_memory(*m, cfg).parameters.value, 2 * (head + table) / 2);
}

// A loss over V classes per token, as the builders make it: 16-bit logits read, their fp32
// log-softmax kept for the backward pass.
model::Model with_loss_head(std::int64_t vocab) {
  auto m = gpt_like(1, kSeq, kHidden, kHeads);
  model::Op loss;
  loss.name = "head.loss";
  loss.kind = model::OpKind::cross_entropy;
  loss.shard = model::ShardKind::vocab;
  loss.layer = 1;
  loss.inputs = {static_cast<int>(m.ops.size()) - 1};
  loss.bytes_read = 2 * s * static_cast<double>(vocab);
  loss.saved_bytes = 4 * s * static_cast<double>(vocab);
  m.ops.push_back(loss);
  m.layers.push_back({"head", model::LayerKind::head, static_cast<int>(m.ops.size()) - 1, 1});
  return m;
}

TEST(MemoryCost, NonTransformerLayersKeepEverythingUnderFullRecompute) {
  const auto m = with_loss_head(50000);
  MemoryConfig cfg = layers(2);
  cfg.recompute = Recompute::full;
  cfg.activation_shard = 0.5;
  EXPECT_DOUBLE_EQ(stage_activation_bytes(m, cfg).stored_per_sample,
                   2 * s * h + 4 * s * 50000 * 0.5);
}

// As the loss's backward pass starts, PyTorch's unfused loss holds the NLL gradient and
// log-softmax's fp32 gradient (4 + 4 bytes per logit) beside everything kept; a fused one the
// 16-bit gradient of its logits. Per sample of the micro-batch, split with the vocabulary, once
// however many micro-batches are in flight, on the loss's stage only, and in its own line.
TEST(MemoryCost, TheLossHoldsItsGradientBuffersAsItsOwnLine) {
  constexpr double V = 50000;
  const auto m = with_loss_head(50000);
  MemoryConfig cfg = layers(2);
  const MemoryBreakdown none = [&] {
    MemoryConfig c = cfg;
    c.micro_batch = 0;
    return stage_memory(m, c);
  }();
  EXPECT_DOUBLE_EQ(none.transient.value, 0);
  EXPECT_DOUBLE_EQ(stage_memory(m, cfg).transient.value, 8 * s * V);
  cfg.micro_batch = 4;
  cfg.inflight_microbatches = 3;
  cfg.activation_shard = 0.5;  // two tensor-parallel ranks: half the vocabulary each
  const MemoryBreakdown mem = stage_memory(m, cfg);
  EXPECT_DOUBLE_EQ(mem.transient.value, 4 * 8 * s * V * 0.5);
  EXPECT_DOUBLE_EQ(stage_activation_bytes(m, cfg).transient_per_sample, 8 * s * V * 0.5);
  EXPECT_DOUBLE_EQ(mem.total().value,
                   (mem.parameters + mem.gradients + mem.optimizer + mem.activations +
                    mem.transient + mem.buffers + mem.reserve + mem.fragmentation)
                       .value);
  cfg.loss = Loss::fused;
  EXPECT_DOUBLE_EQ(stage_memory(m, cfg).transient.value, 4 * 2 * s * V * 0.5);
  cfg.loss = Loss::unfused;
  // A stage without the loss holds none.
  cfg.num_layers = 1;
  EXPECT_DOUBLE_EQ(stage_memory(m, cfg).transient.value, 0);
}

// Under full recomputation a layer's rebuilt activations are live later in the backward pass than
// the loss's buffers: the peak holds the larger, so the line is what the loss needs beyond them.
TEST(MemoryCost, TheLossBuffersBeyondFullRecomputationsWorkingSet) {
  for (const std::int64_t vocab : {1000, 50000}) {
    const auto m = with_loss_head(vocab);
    MemoryConfig cfg = layers(2);
    cfg.recompute = Recompute::full;
    cfg.micro_batch = 2;
    const ActivationBytes act = stage_activation_bytes(m, cfg);
    EXPECT_DOUBLE_EQ(act.working_set_per_sample, 34 * s * h + 5 * a * s * s);
    const double loss = 8 * s * static_cast<double>(vocab);
    EXPECT_DOUBLE_EQ(act.transient_per_sample, loss);
    EXPECT_DOUBLE_EQ(stage_memory(m, cfg).transient.value,
                     2 * std::max(0.0, loss - act.working_set_per_sample))
        << vocab;
  }
  // (The layer's working set lies between the two losses' buffers: both cases are tried.)
  EXPECT_GT(8 * s * 50000, 34 * s * h + 5 * a * s * s);
  EXPECT_LT(8 * s * 1000, 34 * s * h + 5 * a * s * s);
}

TEST(MemoryCost, BuffersReserveAndFragmentationAreTheirOwnLines) {
  const auto m = gpt_like(1, kSeq, kHidden, kHeads);
  MemoryConfig cfg = layers(1);
  constexpr double MiB = 1024.0 * 1024;
  // Defaults: two 25 MiB buckets; a 512 MiB context and 160 MiB of cuBLAS and NCCL workspaces;
  // no fragmentation.
  EXPECT_DOUBLE_EQ(stage_memory(m, cfg).fragmentation.value, 0);
  // 15% of the activations and buffers that the allocator cannot reuse.
  cfg.fragmentation = 0.15;
  const auto mem = stage_memory(m, cfg);
  EXPECT_GT(mem.activations.value, 0);
  EXPECT_DOUBLE_EQ(mem.buffers.value, 50 * MiB);
  EXPECT_DOUBLE_EQ(mem.reserve.value, (512 + 160) * MiB);
  EXPECT_DOUBLE_EQ(mem.fragmentation.value, 0.15 * (mem.activations.value + 50 * MiB));
  EXPECT_DOUBLE_EQ(mem.total().value,
                   (mem.parameters + mem.gradients + mem.optimizer + mem.activations).value +
                       (50 + 512 + 160) * MiB + mem.fragmentation.value);

  // Each term is the configured one: the model's states do not fragment.
  cfg.context = Bytes(3e6);
  cfg.workspace = Bytes(0);
  cfg.gradient_buckets = Bytes(1e6);
  cfg.fragmentation = 0.5;
  cfg.micro_batch = 0;
  const auto small = stage_memory(m, cfg);
  EXPECT_DOUBLE_EQ(small.activations.value, 0);
  EXPECT_DOUBLE_EQ(small.buffers.value, 1e6);
  EXPECT_DOUBLE_EQ(small.reserve.value, 3e6);
  EXPECT_DOUBLE_EQ(small.fragmentation.value, 0.5e6);
  EXPECT_DOUBLE_EQ(small.total().value,
                   (small.parameters + small.gradients + small.optimizer).value + 4.5e6);
}

}  // namespace
}  // namespace hetplan::cost
