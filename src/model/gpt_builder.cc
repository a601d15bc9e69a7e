#include <string>

#include "builders.h"
#include "lm_parts.h"
#include "transformer_block.h"

namespace hetplan::model::detail {

Model build_gpt(const GptConfig& c) {
  Model m;
  m.family = Family::decoder_lm;
  m.seq_len = static_cast<int>(c.seq);
  m.vocab = static_cast<int>(c.vocab);
  m.hidden = static_cast<int>(c.hidden);
  m.heads = static_cast<int>(c.heads);
  m.kv_heads = static_cast<int>(c.heads);
  m.head_dim = static_cast<int>(c.head_dim);
  m.ffn_hidden = static_cast<int>(c.ffn);
  m.num_blocks = static_cast<int>(c.layers);
  GraphBuilder g(m);
  const double act = g.act(), sh = static_cast<double>(c.seq) * static_cast<double>(c.hidden);
  const double se = static_cast<double>(c.seq) * static_cast<double>(c.embed);

  g.begin_layer("embedding", LayerKind::embedding);
  int x = add_word_embedding(g, "embedding.word", c.seq, c.vocab, c.embed);
  if (c.embed != c.hidden) {
    Op in = linear("embedding.project_in", {x}, act, c.seq, c.embed, c.hidden, false, ShardKind::replicated);
    in.saved_bytes = act * se;
    x = g.add(std::move(in));
  }
  // Learned positions added to the token embeddings.
  Op pos = pointwise("embedding.position", OpKind::embedding, ShardKind::replicated, {x}, act, sh, kAddFlops);
  pos.params = c.positions * c.hidden;
  x = g.add(std::move(pos));
  x = g.add(dropout("embedding.dropout", ShardKind::replicated, {x}, act, sh));

  BlockShape b;
  b.seq = c.seq;
  b.hidden = c.hidden;
  b.heads = b.kv_heads = c.heads;
  b.head_dim = c.head_dim;
  b.ffn = c.ffn;
  b.pre_norm = c.pre_norm;
  for (std::int64_t i = 0; i < c.layers; ++i) {
    const std::string name = "layers." + std::to_string(i);
    g.begin_layer(name, LayerKind::transformer);
    x = add_transformer_block(g, name, b, x);
  }

  g.begin_layer("head", LayerKind::head);
  if (c.pre_norm) {
    Op n = norm("head.norm", OpKind::layernorm, {x}, act, c.seq, c.hidden);
    n.saved_bytes = 2 * act * sh;
    x = g.add(std::move(n));
  }
  if (c.embed != c.hidden) {
    Op out = linear("head.project_out", {x}, act, c.seq, c.hidden, c.embed, false, ShardKind::replicated);
    out.saved_bytes = act * se;  // the LM head's input
    x = g.add(std::move(out));
  }
  add_lm_head(g, "head.lm_head", "head.loss", x, c.seq, c.embed, c.vocab, c.tied, false);
  return m;
}

}  // namespace hetplan::model::detail
