// Saved activations per transformer layer against Korthikanti et al. 2022 ("Reducing Activation
// Recomputation in Large Transformer Models"), section 4.1, 16-bit activations.
#include <gtest/gtest.h>

#include "hetplan/model/zoo.h"
#include "load_for_test.h"

namespace hetplan::model {
namespace {

struct LayerSaved {
  double core = 0, rest = 0, replicated = 0, sharded = 0;
};

LayerSaved saved_in_layer(const Model& m, const std::string& layer_name) {
  LayerSaved s;
  for (const Layer& l : m.layers) {
    if (l.name != layer_name) continue;
    for (int i = l.first_op; i < l.first_op + l.num_ops; ++i) {
      const Op& op = m.ops[static_cast<std::size_t>(i)];
      (op.attention_core ? s.core : s.rest) += op.saved_bytes;
      (op.shard == ShardKind::replicated ? s.replicated : s.sharded) += op.saved_bytes;
    }
  }
  return s;
}

Model load(const std::string& spec) { return testing::load_or_fail(spec); }

TEST(ActivationMemory, GptBlockSmallExact) {
  // s = 8, h = 16, a = 4: s*h*(34 + 5as/h) = 128 * (34 + 10) = 5632 bytes per sample.
  const Model m = load("gpt:layers=2,hidden=16,heads=4,seq=8,vocab=32");
  const LayerSaved s = saved_in_layer(m, "layers.1");
  EXPECT_DOUBLE_EQ(s.core + s.rest, 5632);
  EXPECT_DOUBLE_EQ(s.core, 5 * 4 * 8 * 8);  // 5as^2: selective recomputation drops exactly this
  EXPECT_DOUBLE_EQ(s.rest, 34 * 8 * 16);    // and keeps 34sh
}

TEST(ActivationMemory, GptBlockAtScaleAndTensorParallelSplit) {
  const double s = 2048, h = 12288, a = 96;
  const Model m = load("gpt3-175b");
  for (const char* layer : {"layers.0", "layers.95"}) {
    const LayerSaved saved = saved_in_layer(m, layer);
    EXPECT_DOUBLE_EQ(saved.core + saved.rest, s * h * (34 + 5 * a * s / h)) << layer;
    EXPECT_DOUBLE_EQ(saved.rest, 34 * s * h);
    // Tensor parallelism without sequence parallelism: s*h*(10 + 24/t + 5as/(ht)).
    EXPECT_DOUBLE_EQ(saved.replicated, 10 * s * h);
    EXPECT_DOUBLE_EQ(saved.sharded, s * h * (24 + 5 * a * s / h));
  }
}

TEST(ActivationMemory, BertBlockFollowsTheSameFormula) {
  const double s = 512, h = 1024, a = 16;
  const LayerSaved saved = saved_in_layer(load("bert-large"), "layers.7");
  EXPECT_DOUBLE_EQ(saved.core + saved.rest, s * h * (34 + 5 * a * s / h));
  EXPECT_DOUBLE_EQ(saved.core, 5 * a * s * s);
}

TEST(ActivationMemory, GptEmbeddingAndHead) {
  // Embedding dropout mask s*h; final layernorm 4sh (its output is the LM head's input);
  // fp32 logits for the loss 4sv.
  const double s = 8, h = 16, v = 32;
  const Model m = load("gpt:layers=1,hidden=16,heads=4,seq=8,vocab=32");
  EXPECT_DOUBLE_EQ(saved_in_layer(m, "embedding").rest, s * h);
  EXPECT_DOUBLE_EQ(saved_in_layer(m, "head").rest, 4 * s * h + 4 * s * v);
}

TEST(ActivationMemory, LlamaBlockDerivation) {
  // RMSNorm, SwiGLU, GQA, RoPE, no dropout: s*(8h + 4A + 4gd + 6f) + 2as^2 with A = a*d.
  const double s = 16, h = 32, a = 4, g = 2, d = 8, f = 48;
  const Model m = load("llama:layers=2,hidden=32,heads=4,kv_heads=2,ffn=48,seq=16,vocab=64");
  const LayerSaved saved = saved_in_layer(m, "layers.0");
  EXPECT_DOUBLE_EQ(saved.core, 2 * a * s * s);
  EXPECT_DOUBLE_EQ(saved.rest, s * (8 * h + 4 * a * d + 4 * g * d + 6 * f));
}

TEST(ActivationMemory, MixtralBlockDerivation) {
  // Attention as Llama; the FFN keeps router probabilities 4sE, dispatched tokens 2skh, gate and
  // up outputs 4skf, down input 2skf, expert outputs 2skh; plus the second norm's 4sh.
  const double s = 16, h = 32, a = 4, g = 2, d = 8, f = 48, e = 4, k = 2;
  const Model m =
      load("moe:layers=1,hidden=32,heads=4,kv_heads=2,ffn=48,seq=16,vocab=64,experts=4,top_k=2");
  const LayerSaved saved = saved_in_layer(m, "layers.0");
  EXPECT_DOUBLE_EQ(saved.core, 2 * a * s * s);
  const double attention = s * (4 * h + 2 * (a * d + 2 * g * d) + 2 * a * d);
  EXPECT_DOUBLE_EQ(saved.rest,
                   attention + 4 * s * h + 4 * s * e + s * k * (2 * h + 4 * f + 2 * f + 2 * h));
}

}  // namespace
}  // namespace hetplan::model
