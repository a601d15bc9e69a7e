// The zoo's builders: one configuration struct and one build function per family. The spec
// readers (family_specs.cc) fill the structs from key=value text and check them; the builders
// assume valid configurations.
#pragma once

#include <cstdint>
#include <string>

#include "hetplan/model/model.h"

namespace hetplan::model::detail {

// GPT-2/3 style decoder (and OPT): learned positions, layernorm, GeLU, biases, dropout.
struct GptConfig {
  std::int64_t layers = 0, hidden = 0, heads = 0, head_dim = 0, ffn = 0, seq = 0, vocab = 0;
  std::int64_t embed = 0;      // word-embedding width; != hidden adds project_in/out (OPT-350M)
  std::int64_t positions = 0;  // learned position embeddings (OPT keeps 2 extra)
  bool pre_norm = true;        // post-norm models (OPT-350M) have no final norm
  bool tied = true;            // LM head shares the word embedding
  DType dtype = DType::bf16;   // compute and activation dtype (spec key dtype=)
};
Model build_gpt(const GptConfig& c);

// BERT: post-norm encoder with token-type embeddings, MLM head (tied decoder) and NSP head.
struct BertConfig {
  std::int64_t layers = 0, hidden = 0, heads = 0, ffn = 0, seq = 0, vocab = 0, type_vocab = 2;
  DType dtype = DType::bf16;  // compute and activation dtype (spec key dtype=)
  // Pre-training (BertForPreTraining: MLM logits on every position and the next-sentence head), or
  // sequence classification (BertForSequenceClassification: the pooler and a classifier of
  // `labels` outputs on the [CLS] token, no MLM head).
  bool classification = false;
  std::int64_t labels = 2;
};
Model build_bert(const BertConfig& c);

// ViT: patch embedding, class token, pre-norm encoder, linear classifier on the class token.
struct VitConfig {
  std::int64_t layers = 0, hidden = 0, heads = 0, mlp = 0, patch = 0, image = 0, classes = 0;
  std::int64_t channels = 3;
  DType dtype = DType::bf16;  // compute and activation dtype (spec key dtype=)
};
Model build_vit(const VitConfig& c);

// Llama and Mixtral (experts > 0): RMSNorm, SwiGLU, GQA, RoPE, no biases, no dropout.
struct LlamaConfig {
  std::int64_t layers = 0, hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0, seq = 0,
               vocab = 0;
  bool tied = false;
  std::int64_t experts = 0, top_k = 0;
  DType dtype = DType::bf16;  // compute and activation dtype (spec key dtype=)
};
Model build_llama(const LlamaConfig& c);

struct ResnetConfig {
  int depth = 50;  // 18, 34 (basic blocks), 50, 101, 152 (bottleneck blocks)
  std::int64_t width = 64;  // channels of the first stage (doubled at each of the next three)
  std::int64_t image = 224, classes = 1000;
  DType dtype = DType::bf16;  // compute and activation dtype (spec key dtype=)
};
Model build_resnet(const ResnetConfig& c);

struct VggConfig {
  int depth = 16;  // 11, 13, 16, 19
  std::int64_t image = 224, classes = 1000;
  DType dtype = DType::bf16;  // compute and activation dtype (spec key dtype=)
};
Model build_vgg(const VggConfig& c);

struct InceptionConfig {
  std::int64_t image = 299, classes = 1000;
  DType dtype = DType::bf16;  // compute and activation dtype (spec key dtype=)
};
Model build_inception_v3(const InceptionConfig& c);

// Multi-layer perceptron on vectors: `layers` hidden Linear+ReLU layers, then a Linear head and
// cross-entropy. One sample is one input vector.
struct MlpConfig {
  std::int64_t layers = 0, hidden = 0, in = 0, out = 0;
  DType dtype = DType::bf16;  // compute and activation dtype (spec key dtype=)
};
Model build_mlp(const MlpConfig& c);

}  // namespace hetplan::model::detail
