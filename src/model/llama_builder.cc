#include "builders.h"
#include "lm_parts.h"
#include "transformer_block.h"

namespace hetplan::model::detail {

Model build_llama(const LlamaConfig& c) {
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
  Model m;
  describe_transformer(m, c.experts > 0 ? Family::moe_lm : Family::decoder_lm, b, c.layers,
                       c.vocab);
  m.dtype = c.dtype;
  GraphBuilder g(m);

  // RoPE has no parameters and no embedding op: positions enter in each block's rope op.
  g.begin_layer("embedding", LayerKind::embedding);
  int x = add_word_embedding(g, "embedding.word", c.seq, c.vocab, c.hidden);

  x = add_transformer_layers(g, b, c.layers, x);

  g.begin_layer("head", LayerKind::head);
  x = add_saving_norm(g, "head.norm", OpKind::rmsnorm, c.seq, c.hidden, x);
  add_lm_head(g, "head.lm_head", "head.loss", x, c.seq, c.hidden, c.vocab, c.tied, false);
  return m;
}

}  // namespace hetplan::model::detail
