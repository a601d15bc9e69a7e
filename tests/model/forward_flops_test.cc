// Forward FLOPs per sample; a multiply-add counts 2 FLOPs.
#include <gtest/gtest.h>

#include <cmath>

#include "hetplan/model/zoo.h"
#include "load_for_test.h"

namespace hetplan::model {
namespace {

Model load(const std::string& spec) { return testing::load_or_fail(spec); }

double gemm_flops(const Model& m) {
  double f = 0;
  for (const Op& op : m.ops)
    if (op.kind == OpKind::conv2d || op.kind == OpKind::matmul || op.kind == OpKind::batched_matmul)
      f += op.flops;
  return f;
}

TEST(ForwardFlops, GptBlockSmallExact) {
  // s = 8, h = 16, a = 4, f = 64, per op: norm1 8sh = 1024; qkv 2*s*h*3h + 3sh = 12672;
  // QK^T 2*a*s*s*d = 2048; softmax 4as^2 = 1024; dropout as^2 = 256; scores x V 2048;
  // proj 2sh^2 + sh = 4224; dropout 128; residual 128; norm2 1024; fc1 2shf + sf = 16896;
  // GeLU 8sf = 4096; fc2 2sfh + sh = 16512; dropout 128; residual 128.
  const Model m = load("gpt:layers=1,hidden=16,heads=4,seq=8,vocab=32");
  double layer = 0;
  for (const Op& op : m.ops)
    if (m.layers[static_cast<std::size_t>(op.layer)].name == "layers.0") layer += op.flops;
  EXPECT_DOUBLE_EQ(layer, 62336);
  // Embedding: position add sh + dropout sh; head: norm 8sh, LM head 2shv, loss 5sv.
  EXPECT_DOUBLE_EQ(m.forward_flops_per_sample(), 62336 + 256 + 1024 + 8192 + 1280);
}

TEST(ForwardFlops, GptPerTokenIsTwiceParametersPlusAttention) {
  // Kaplan et al.: 2 N + 2 l s h per token of forward (N without embeddings, plus the LM head's
  // V h multiply-adds); elementwise ops add well under 1%.
  const Model m = load("gpt3-175b");
  const double l = 96, h = 12288, s = 2048, v = 50257;
  const double n = static_cast<double>(m.parameters()) - (v + s) * h;
  const double expected = 2 * (n + v * h) + 4 * l * s * h;
  EXPECT_NEAR(m.forward_flops_per_sample() / s / expected, 1, 0.005);
}

// torchvision's published multiply-adds ("GFLOPS" in its model tables), convolutions and linear
// layers; the whole graph also counts batchnorm, ReLU and pooling (about 1% more).
TEST(ForwardFlops, VisionModelsMatchTorchvision) {
  const std::pair<const char*, double> published[] = {
      {"resnet50", 4.09e9}, {"resnet101", 7.80e9},    {"resnet152", 11.51e9}, {"vgg16", 15.47e9},
      {"vgg19", 19.63e9},   {"inception-v3", 5.71e9}, {"vit-b16", 17.56e9},   {"vit-l16", 61.55e9},
  };
  for (const auto& [name, macs] : published) {
    const Model m = load(name);
    EXPECT_NEAR(gemm_flops(m) / (2 * macs), 1, 0.005) << name;
    EXPECT_GT(m.forward_flops_per_sample(), gemm_flops(m));
    EXPECT_LT(m.forward_flops_per_sample(), 1.02 * gemm_flops(m)) << name;
  }
}

TEST(ForwardFlops, ResNet50IsAbout8Point2Gflops) {
  const double f = load("resnet50").forward_flops_per_sample();
  EXPECT_GT(f, 8.18e9);
  EXPECT_LT(f, 8.35e9);
}

TEST(ForwardFlops, MixtralCountsOnlyTheRoutedExperts) {
  // Per token: top-2 of 8 experts, each 3 h f multiply-adds.
  const Model m = load("mixtral-8x7b");
  double experts = 0;
  for (const Op& op : m.ops)
    if (op.shard == ShardKind::expert && op.kind == OpKind::matmul) experts += op.flops;
  EXPECT_DOUBLE_EQ(experts, 32.0 * 4096 * 2 * 2 * 3 * 4096 * 14336);
}

TEST(ForwardFlops, SeqOverrideScalesTokens) {
  const Model a = load("gpt3-1.3b");
  const Model b = load("gpt3-1.3b:seq=1024");
  EXPECT_EQ(b.seq_len, 1024);
  EXPECT_EQ(b.name, "gpt3-1.3b:seq=1024");
  EXPECT_LT(b.forward_flops_per_sample(), 0.5 * a.forward_flops_per_sample());
  EXPECT_EQ(a.parameters(), b.parameters() + 1024 * 2048);  // fewer learned positions
}

}  // namespace
}  // namespace hetplan::model
