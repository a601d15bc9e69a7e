#include "builders.h"
#include "lm_parts.h"
#include "transformer_block.h"

namespace hetplan::model::detail {

Model build_gpt(const GptConfig& c) {
  BlockShape b = gpt_style_block(c.seq, c.hidden, c.heads, c.head_dim, c.ffn);
  b.pre_norm = c.pre_norm;
  Model m;
  describe_transformer(m, Family::decoder_lm, b, c.layers, c.vocab);
  m.dtype = c.dtype;
  GraphBuilder g(m);
  const double act = g.act(), sh = static_cast<double>(c.seq) * static_cast<double>(c.hidden);
  const double se = static_cast<double>(c.seq) * static_cast<double>(c.embed);

  g.begin_layer("embedding", LayerKind::embedding);
  int x = add_word_embedding(g, "embedding.word", c.seq, c.vocab, c.embed);
  if (c.embed != c.hidden) {
    Op in = linear("embedding.project_in", {x}, act, c.seq, c.embed, c.hidden, false,
                   ShardKind::replicated);
    in.saved_bytes = act * se;
    in.compute = op_compute(OpFn::linear, {c.seq, c.hidden});
    x = g.add(std::move(in));
  }
  // Learned positions added to the token embeddings.
  Op pos = pointwise("embedding.position", OpKind::embedding, ShardKind::replicated, {x}, act, sh,
                     kAddFlops);
  pos.params = c.positions * c.hidden;
  pos.compute = op_compute(OpFn::learned_positions, {c.seq, c.hidden});
  x = g.add(std::move(pos));
  Op drop = dropout("embedding.dropout", ShardKind::replicated, {x}, act, sh);
  drop.compute = op_compute(OpFn::dropout, {c.seq, c.hidden}, false, b.drop);
  x = g.add(std::move(drop));

  x = add_transformer_layers(g, b, c.layers, x);

  g.begin_layer("head", LayerKind::head);
  if (c.pre_norm) x = add_saving_norm(g, "head.norm", OpKind::layernorm, c.seq, c.hidden, x);
  if (c.embed != c.hidden) {
    Op out = linear("head.project_out", {x}, act, c.seq, c.hidden, c.embed, false,
                    ShardKind::replicated);
    out.saved_bytes = act * se;  // the LM head's input
    out.compute = op_compute(OpFn::linear, {c.seq, c.embed});
    x = g.add(std::move(out));
  }
  add_lm_head(g, "head.lm_head", "head.loss", x, c.seq, c.embed, c.vocab, c.tied, false);
  return m;
}

}  // namespace hetplan::model::detail
