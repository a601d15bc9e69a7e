#include "builders.h"
#include "lm_parts.h"
#include "transformer_block.h"

namespace hetplan::model::detail {

namespace {

// The MLM head: a dense layer, GELU and layer norm on every position, then the decoder tied to the
// word embedding and its loss.
void add_mlm_head(GraphBuilder& g, const BertConfig& c, int last) {
  const double act = g.act(), sh = static_cast<double>(c.seq) * static_cast<double>(c.hidden);
  Op transform =
      linear("head.mlm.dense", {last}, act, c.seq, c.hidden, c.hidden, true, ShardKind::replicated);
  transform.compute = op_compute(OpFn::linear, {c.seq, c.hidden}, true);
  const int dense = g.add(std::move(transform));
  Op gelu = pointwise("head.mlm.gelu", OpKind::elementwise, ShardKind::replicated, {dense}, act, sh,
                      kGeluFlops);
  gelu.saved_bytes = act * sh;
  gelu.compute = op_compute(OpFn::gelu, {c.seq, c.hidden});
  const int ge = g.add(std::move(gelu));
  const int mlm_in = add_saving_norm(g, "head.mlm.norm", OpKind::layernorm, c.seq, c.hidden, ge);
  add_lm_head(g, "head.mlm.decoder", "head.mlm.loss", mlm_in, c.seq, c.hidden, c.vocab, true, true);
}

}  // namespace

// BERT pre-training graph (BertForPreTraining): MLM logits on every position, as Megatron-LM's
// BERT computes them, and the next-sentence head on the [CLS] token. With c.classification,
// BertForSequenceClassification: the pooler and a classifier on the [CLS] token alone.
Model build_bert(const BertConfig& c) {
  BlockShape b = gpt_style_block(c.seq, c.hidden, c.heads, c.hidden / c.heads, c.ffn);
  b.pre_norm = false;
  b.causal = false;
  Model m;
  describe_transformer(m, Family::encoder, b, c.layers, c.vocab);
  m.dtype = c.dtype;
  GraphBuilder g(m);
  const double act = g.act(), sh = static_cast<double>(c.seq) * static_cast<double>(c.hidden);
  const double h = static_cast<double>(c.hidden);

  g.begin_layer("embedding", LayerKind::embedding);
  int x = add_word_embedding(g, "embedding.word", c.seq, c.vocab, c.hidden);
  Op pos = pointwise("embedding.position", OpKind::embedding, ShardKind::replicated, {x}, act, sh,
                     2 * kAddFlops);
  pos.params = (c.seq + c.type_vocab) * c.hidden;  // position and token-type tables
  pos.compute = op_compute(OpFn::positions, {c.seq, c.hidden});
  x = g.add(std::move(pos));
  Op n = norm("embedding.norm", OpKind::layernorm, {x}, act, c.seq, c.hidden);
  n.saved_bytes = act * sh;  // its input; its output goes through dropout first
  n.compute = op_compute(OpFn::layernorm, {c.seq, c.hidden});
  x = g.add(std::move(n));
  Op drop = dropout("embedding.dropout", ShardKind::replicated, {x}, act, sh);
  drop.saved_bytes += act * sh;  // the first block's QKV input
  drop.compute = op_compute(OpFn::dropout, {c.seq, c.hidden}, false, b.drop);
  x = g.add(std::move(drop));

  x = add_transformer_layers(g, b, c.layers, x);

  g.begin_layer("head", LayerKind::head);
  const int last = x;
  if (!c.classification) add_mlm_head(g, c, last);
  // The pooler reads the first token ([CLS]) of the last block's output.
  Op pool = linear("head.pooler", {last}, act, 1, c.hidden, c.hidden, true, ShardKind::replicated);
  pool.compute = op_compute(OpFn::linear, {c.hidden}, true);
  const int pooler = g.add(std::move(pool));
  Op tanh = pointwise("head.pooler.tanh", OpKind::elementwise, ShardKind::replicated, {pooler}, act,
                      h, kGeluFlops);
  tanh.saved_bytes = act * h;  // its output, which the classifier also reads
  tanh.compute = op_compute(OpFn::tanh, {c.hidden});
  const int pooled = g.add(std::move(tanh));
  const std::int64_t outputs = c.classification ? c.labels : 2;
  const char* head = c.classification ? "head.classifier" : "head.nsp";
  Op classify = linear(head, {pooled}, act, 1, c.hidden, outputs, true, ShardKind::replicated);
  classify.compute = op_compute(OpFn::linear, {outputs}, true);
  const int logits = g.add(std::move(classify));
  Op loss =
      cross_entropy(std::string(head) + ".loss", ShardKind::replicated, {logits}, act, 1, outputs);
  loss.compute = op_compute(OpFn::cross_entropy, {1});
  g.add(std::move(loss));
  return m;
}

}  // namespace hetplan::model::detail
