// The transformer block shared by the GPT, BERT, ViT, Llama and Mixtral builders.
#pragma once

#include <cstdint>
#include <string>

#include "graph_builder.h"

namespace hetplan::model::detail {

struct BlockShape {
  std::int64_t seq = 0, hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0;
  OpKind norm = OpKind::layernorm;  // or rmsnorm
  bool pre_norm = true;             // GPT/ViT/Llama; false for BERT/OPT-350M (post-norm)
  bool swiglu = false;              // gate/up/down FFN with SiLU (Llama); else fc1-GeLU-fc2
  bool dropout = true;              // attention-probability, attention-output and FFN dropout
  double drop = 0.1;                // their probability
  bool causal = true;               // GPT/Llama; false for BERT/ViT (every token sees every token)
  bool bias = true;
  bool rope = false;
  std::int64_t experts = 0, top_k = 0;  // experts > 0: the FFN is a top-k mixture of experts
};

// A GPT/BERT/ViT block: multi-head attention, layernorm, GeLU, biases, dropout, pre-norm.
BlockShape gpt_style_block(std::int64_t seq, std::int64_t hidden, std::int64_t heads,
                           std::int64_t head_dim, std::int64_t ffn);

// Appends one block, named `prefix`.*, reading `input`; returns the op that produces its output.
//
// Saved activations per sample (s tokens, h hidden, a heads, A = a*head_dim, f ffn, 16-bit
// activations, 1-byte dropout masks), following Korthikanti et al. 2022, section 4.1:
//  * GPT/BERT block (layernorm, GeLU, dropout, A = h): 2 norms x 4sh (input and output) +
//    QKV output 6sh + attention-output input 2sh + 2 dropout masks x sh + GeLU input 8sh +
//    FC2 input 8sh = 34sh outside the attention core; inside it softmax output 2as^2, its dropout
//    mask as^2 and the dropped-out probabilities 2as^2 = 5as^2. Total s*h*(34 + 5as/h).
//  * Llama block (RMSNorm, SwiGLU, GQA with kv_heads g and d = head_dim, RoPE, no dropout, no
//    biases), by the same rules: norms 2 x 4sh; rotated Q and K 2s(A + gd) and V 2sgd; attention-
//    output input 2sA; gate and up outputs 4sf (SiLU-mul input); down input 2sf; the attention
//    core keeps only the softmax output 2as^2 (no dropout, so scores x V reads the same tensor).
//    Total s*(8h + 4A + 4gd + 6f) + 2as^2; for Llama-2 7B (A = h, g = a, f = 11008) about
//    s*h*(32.1 + 2as/h).
//  * Mixture of experts (Mixtral): the FFN part becomes router probabilities 4sE (fp32), the
//    dispatched tokens 2skh, the gate and up outputs 4skf, the down input 2skf and the expert
//    outputs 2skh for the combine (k = top_k, E experts).
int add_transformer_block(GraphBuilder& g, const std::string& prefix, const BlockShape& b,
                          int input);

// Appends `layers` blocks, each its own layer "layers.<i>"; returns the last block's output.
int add_transformer_layers(GraphBuilder& g, const BlockShape& b, std::int64_t layers, int input);

// A norm over [seq x width] that keeps its input and its output (the next GEMM's input): 4sh.
int add_saving_norm(GraphBuilder& g, const std::string& name, OpKind kind, std::int64_t seq,
                    std::int64_t width, int input);

// Fills the architecture fields of a transformer model (family, sizes) from its block shape.
void describe_transformer(Model& m, Family family, const BlockShape& b, std::int64_t layers,
                          std::int64_t vocab);

}  // namespace hetplan::model::detail
