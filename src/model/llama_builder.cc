#include <string>

#include "builders.h"
#include "lm_parts.h"
#include "transformer_block.h"

namespace hetplan::model::detail {

Model build_llama(const LlamaConfig& c) {
  Model m;
  m.family = c.experts > 0 ? Family::moe_lm : Family::decoder_lm;
  m.seq_len = static_cast<int>(c.seq);
  m.vocab = static_cast<int>(c.vocab);
  m.hidden = static_cast<int>(c.hidden);
  m.heads = static_cast<int>(c.heads);
  m.kv_heads = static_cast<int>(c.kv_heads);
  m.head_dim = static_cast<int>(c.head_dim);
  m.ffn_hidden = static_cast<int>(c.ffn);
  m.num_blocks = static_cast<int>(c.layers);
  m.experts = static_cast<int>(c.experts);
  m.top_k = static_cast<int>(c.top_k);
  GraphBuilder g(m);

  // RoPE has no parameters and no embedding op: positions enter in each block's rope op.
  g.begin_layer("embedding", LayerKind::embedding);
  int x = add_word_embedding(g, "embedding.word", c.seq, c.vocab, c.hidden);

  BlockShape b;
  b.seq = c.seq;
  b.hidden = c.hidden;
  b.heads = c.heads;
  b.kv_heads = c.kv_heads;
  b.head_dim = c.head_dim;
  b.ffn = c.ffn;
  b.norm = OpKind::rmsnorm;
  b.swiglu = true;
  b.dropout = false;
  b.bias = false;
  b.rope = true;
  b.experts = c.experts;
  b.top_k = c.top_k;
  for (std::int64_t i = 0; i < c.layers; ++i) {
    const std::string name = "layers." + std::to_string(i);
    g.begin_layer(name, LayerKind::transformer);
    x = add_transformer_block(g, name, b, x);
  }

  g.begin_layer("head", LayerKind::head);
  Op n = norm("head.norm", OpKind::rmsnorm, {x}, g.act(), c.seq, c.hidden);
  n.saved_bytes = 2 * g.act() * static_cast<double>(c.seq) * static_cast<double>(c.hidden);
  x = g.add(std::move(n));
  add_lm_head(g, "head.lm_head", "head.loss", x, c.seq, c.hidden, c.vocab, c.tied, false);
  return m;
}

}  // namespace hetplan::model::detail
