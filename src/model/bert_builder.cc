#include <string>

#include "builders.h"
#include "lm_parts.h"
#include "transformer_block.h"

namespace hetplan::model::detail {

// BERT pre-training graph (BertForPreTraining): MLM logits on every position, as Megatron-LM's
// BERT computes them, and the next-sentence head on the [CLS] token.
Model build_bert(const BertConfig& c) {
  Model m;
  m.family = Family::encoder;
  m.seq_len = static_cast<int>(c.seq);
  m.vocab = static_cast<int>(c.vocab);
  m.hidden = static_cast<int>(c.hidden);
  m.heads = m.kv_heads = static_cast<int>(c.heads);
  m.head_dim = static_cast<int>(c.hidden / c.heads);
  m.ffn_hidden = static_cast<int>(c.ffn);
  m.num_blocks = static_cast<int>(c.layers);
  GraphBuilder g(m);
  const double act = g.act(), sh = static_cast<double>(c.seq) * static_cast<double>(c.hidden);
  const double h = static_cast<double>(c.hidden);

  g.begin_layer("embedding", LayerKind::embedding);
  int x = add_word_embedding(g, "embedding.word", c.seq, c.vocab, c.hidden);
  Op pos = pointwise("embedding.position", OpKind::embedding, ShardKind::replicated, {x}, act, sh, 2 * kAddFlops);
  pos.params = (c.seq + c.type_vocab) * c.hidden;  // position and token-type tables
  x = g.add(std::move(pos));
  Op n = norm("embedding.norm", OpKind::layernorm, {x}, act, c.seq, c.hidden);
  n.saved_bytes = act * sh;  // its input; its output goes through dropout first
  x = g.add(std::move(n));
  Op drop = dropout("embedding.dropout", ShardKind::replicated, {x}, act, sh);
  drop.saved_bytes += act * sh;  // the first block's QKV input
  x = g.add(std::move(drop));

  BlockShape b;
  b.seq = c.seq;
  b.hidden = c.hidden;
  b.heads = b.kv_heads = c.heads;
  b.head_dim = c.hidden / c.heads;
  b.ffn = c.ffn;
  b.pre_norm = false;
  for (std::int64_t i = 0; i < c.layers; ++i) {
    const std::string name = "layers." + std::to_string(i);
    g.begin_layer(name, LayerKind::transformer);
    x = add_transformer_block(g, name, b, x);
  }

  g.begin_layer("head", LayerKind::head);
  const int last = x;
  const int dense = g.add(linear("head.mlm.dense", {last}, act, c.seq, c.hidden, c.hidden, true, ShardKind::replicated));
  Op gelu = pointwise("head.mlm.gelu", OpKind::elementwise, ShardKind::replicated, {dense}, act, sh, kGeluFlops);
  gelu.saved_bytes = act * sh;
  const int ge = g.add(std::move(gelu));
  Op mn = norm("head.mlm.norm", OpKind::layernorm, {ge}, act, c.seq, c.hidden);
  mn.saved_bytes = 2 * act * sh;
  const int mlm_in = g.add(std::move(mn));
  add_lm_head(g, "head.mlm.decoder", "head.mlm.loss", mlm_in, c.seq, c.hidden, c.vocab, true, true);
  const int pooler = g.add(linear("head.pooler", {last}, act, 1, c.hidden, c.hidden, true, ShardKind::replicated));
  Op tanh = pointwise("head.pooler.tanh", OpKind::elementwise, ShardKind::replicated, {pooler}, act, h, kGeluFlops);
  tanh.saved_bytes = act * h;  // its output, which the NSP classifier also reads
  const int pooled = g.add(std::move(tanh));
  const int nsp = g.add(linear("head.nsp", {pooled}, act, 1, c.hidden, 2, true, ShardKind::replicated));
  g.add(cross_entropy("head.nsp.loss", ShardKind::replicated, {nsp}, act, 1, 2));
  return m;
}

}  // namespace hetplan::model::detail
