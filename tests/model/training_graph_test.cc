// The training step derived from a tiny MLP, with every figure worked out by hand.
#include <gtest/gtest.h>

#include <string>

#include "hetplan/model/training.h"
#include "hetplan/model/zoo.h"

namespace hetplan::model {
namespace {

// mlp:layers=1,hidden=4,in=3,out=2 in bf16 (2 bytes per element):
//  0 layers.0.fc    3 -> 4 + bias: flops 2*3*4 + 4 = 28, read 6, written 8, params 16
//  1 layers.0.relu  4 elements:    flops 4, read 8, written 8
//  2 head.fc        4 -> 2 + bias: flops 2*4*2 + 2 = 18, read 8, written 4, params 10
//  3 head.loss      2 logits:      flops 5*2 = 10, read 4, written 4 (fp32 loss), saved 8
Model tiny() {
  auto m = load_model("mlp:layers=1,hidden=4,in=3,out=2");
  EXPECT_TRUE(m.ok());
  return *m;
}

TEST(TrainingGraph, TinyMlpForward) {
  const Model m = tiny();
  ASSERT_EQ(m.ops.size(), 4u);
  EXPECT_DOUBLE_EQ(m.forward_flops_per_sample(), 28 + 4 + 18 + 10);
  EXPECT_EQ(m.parameters(), 26);
  const TrainingGraph tg = derive_training_graph(m);
  ASSERT_EQ(tg.forward.size(), 4u);
  EXPECT_DOUBLE_EQ(tg.forward[0].flops, 28);
  EXPECT_DOUBLE_EQ(tg.forward[0].bytes, 6 + 8 + 2 * 16);  // activations + bf16 weights
  EXPECT_DOUBLE_EQ(tg.forward[0].weight_bytes, 32);
  EXPECT_DOUBLE_EQ(tg.forward[1].bytes, 16);
  EXPECT_EQ(tg.forward[2].gemm, (GemmShape{1, 2, 4, 1}));
  EXPECT_EQ(tg.forward[3].phase, Phase::forward);
  // The loss over 2 bf16 logits: the cast to fp32 (2 + 4 per logit), log-softmax (two reads of 4
  // and a write of 4 per logit), its fp32 loss (4).
  EXPECT_DOUBLE_EQ(tg.forward[3].bytes, 2 * (2 + 4 + 12) + 4);
  // Fused into one kernel: the logits read once (2 per logit) and the loss written.
  EXPECT_DOUBLE_EQ(tg.forward[3].fused_bytes, 2 * 2 + 4);
  EXPECT_DOUBLE_EQ(tg.forward[2].fused_bytes, 0);
}

TEST(TrainingGraph, TinyMlpBackward) {
  const TrainingGraph tg = derive_training_graph(tiny());
  ASSERT_EQ(tg.backward.size(), 4u);
  // Reverse order.
  EXPECT_EQ(tg.backward[0].op, 3);
  EXPECT_EQ(tg.backward[3].op, 0);
  EXPECT_EQ(tg.backward[3].phase, Phase::backward);
  // Loss: 1x FLOPs; per logit the NLL gradient (4), log-softmax's backward (three reads of 4, a
  // write of 4) and the cast back to bf16 (4 + 2).
  EXPECT_DOUBLE_EQ(tg.backward[0].flops, 10);
  EXPECT_DOUBLE_EQ(tg.backward[0].bytes, 2 * (4 + 16 + 6));
  EXPECT_DOUBLE_EQ(tg.backward[0].fused_bytes,
                   2 * (2 + 2));  // the logits read, their gradient written
  // head.fc: 2x FLOPs; 2 x written (4) + 2 x read (8) + weights 10 x (2 read + 8 fp32 grad rmw).
  EXPECT_DOUBLE_EQ(tg.backward[1].flops, 36);
  EXPECT_DOUBLE_EQ(tg.backward[1].weight_bytes, 100);
  EXPECT_DOUBLE_EQ(tg.backward[1].bytes, 8 + 16 + 100);
  // relu: 1x; dY 8 + 2 x 8.
  EXPECT_DOUBLE_EQ(tg.backward[2].flops, 4);
  EXPECT_DOUBLE_EQ(tg.backward[2].bytes, 24);
  // layers.0.fc: 56 FLOPs; 16 + 12 + 16 x 10.
  EXPECT_DOUBLE_EQ(tg.backward[3].flops, 56);
  EXPECT_DOUBLE_EQ(tg.backward[3].bytes, 16 + 12 + 160);
}

TEST(TrainingGraph, TinyMlpAdam) {
  const TrainingGraph tg = derive_training_graph(tiny());
  ASSERT_EQ(tg.optimizer.size(), 2u);  // the two linear layers
  EXPECT_EQ(tg.optimizer[0].op, 0);
  EXPECT_EQ(tg.optimizer[1].op, 2);
  EXPECT_EQ(tg.optimizer[0].phase, Phase::optimizer);
  // 30 bytes per parameter: fp32 grad 4, fp32 master/m/v read+write 24, bf16 weight 2.
  EXPECT_DOUBLE_EQ(tg.optimizer[0].bytes, 16 * 30);
  EXPECT_DOUBLE_EQ(tg.optimizer[1].bytes, 10 * 30);
  EXPECT_DOUBLE_EQ(tg.optimizer[0].flops, 16 * 14);
}

TEST(TrainingGraph, OptimizerStepsCountTheParameterTensorsAsPyTorchHoldsThem) {
  const auto tensors = [](const std::string& spec) {
    auto m = load_model(spec);
    EXPECT_TRUE(m.ok()) << spec;
    int n = 0;
    for (const TrainOp& o : derive_training_graph(*m).optimizer) n += o.tensors;
    return n;
  };
  // Each linear layer's weight and bias.
  EXPECT_EQ(tensors("mlp:layers=1,hidden=4,in=3,out=2"), 4);
  // torchvision's: ResNet-50 53 convolutions without bias, 53 batchnorms of two, the classifier's
  // two; VGG-16 13 convolutions and 3 linear layers, each with a bias.
  EXPECT_EQ(tensors("resnet50"), 161);
  EXPECT_EQ(tensors("vgg16"), 32);
  // GPT-2's: word and position tables, 12 per block (two layernorms, four linear layers, each of
  // two), the final layernorm's two; the head is the word table.
  EXPECT_EQ(tensors("gpt:layers=2,hidden=16,heads=4,seq=8,vocab=32"), 2 + 2 * 12 + 2);
  // Llama's (Megatron's fused QKV and gate-up): the table, 6 per block, the final norm, the head.
  EXPECT_EQ(tensors("llama:layers=2,hidden=16,heads=4,seq=8,vocab=32"), 1 + 2 * 6 + 1 + 1);
}

TEST(TrainingGraph, ALossAfterALogSoftmaxIsTheNllAlone) {
  // An ONNX graph's LogSoftmax then NegativeLogLikelihoodLoss: the softmax op prices the
  // log-softmax, the loss only its own reads and writes (4 bf16 logits of 2 bytes, a 4-byte loss).
  Model m;
  m.layers.push_back(Layer{"head", LayerKind::head, 0, 2});
  Op sm;
  sm.name = "log_softmax";
  sm.kind = OpKind::softmax;
  sm.bytes_read = sm.bytes_written = 8;
  Op loss;
  loss.name = "nll";
  loss.kind = OpKind::cross_entropy;
  loss.inputs = {0};
  loss.bytes_read = 8;
  loss.bytes_written = 4;
  m.ops = {sm, loss};
  const TrainingGraph tg = derive_training_graph(m);
  EXPECT_DOUBLE_EQ(tg.forward[1].bytes, 8 + 4);
  EXPECT_DOUBLE_EQ(tg.backward[0].bytes, 4 + 2 * 8);
  EXPECT_FALSE(is_whole_loss(m, m.ops[1]));
  EXPECT_DOUBLE_EQ(tg.forward[1].fused_bytes, 0);
  // Reading the logits themselves, it is the whole loss: 4 x (2 + 4 + 12) + 4.
  m.ops[0].kind = OpKind::matmul;
  EXPECT_DOUBLE_EQ(derive_training_graph(m).forward[1].bytes, 4 * 18 + 4);
}

TEST(TrainingGraph, BackwardIsTwiceForwardForGemmsAndTiedWeightsHaveNoOptimizerStep) {
  auto m = load_model("gpt:layers=1,hidden=16,heads=4,seq=8,vocab=32");
  ASSERT_TRUE(m.ok());
  const TrainingGraph tg = derive_training_graph(*m);
  for (const TrainOp& b : tg.backward) {
    const Op& op = m->ops[static_cast<std::size_t>(b.op)];
    const bool gemm = op.kind == OpKind::matmul || op.kind == OpKind::batched_matmul;
    const bool memory_bound = op.kind == OpKind::softmax || op.kind == OpKind::layernorm;
    if (gemm || memory_bound) {
      EXPECT_DOUBLE_EQ(b.flops, (gemm ? 2 : 1) * op.flops) << op.name;
    }
  }
  std::int64_t stepped = 0;
  for (const TrainOp& o : tg.optimizer) stepped += m->ops[static_cast<std::size_t>(o.op)].params;
  EXPECT_EQ(stepped, m->parameters());
  EXPECT_STREQ(to_string(Phase::backward), "backward");
}

}  // namespace
}  // namespace hetplan::model
