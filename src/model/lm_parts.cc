#include "lm_parts.h"

namespace hetplan::model::detail {

int add_word_embedding(GraphBuilder& g, const std::string& name, std::int64_t seq,
                       std::int64_t vocab, std::int64_t width) {
  Op op;
  op.name = name;
  op.kind = OpKind::embedding;
  op.shard = ShardKind::vocab;
  op.bytes_read = kTokenIdBytes * static_cast<double>(seq);
  op.bytes_written = g.act() * static_cast<double>(seq) * static_cast<double>(width);
  op.params = vocab * width;
  op.compute = op_compute(OpFn::embedding, {seq, width});
  return g.add(std::move(op));
}

int add_lm_head(GraphBuilder& g, const std::string& head_name, const std::string& loss_name,
                int input, std::int64_t seq, std::int64_t width, std::int64_t vocab, bool tied,
                bool bias) {
  Op head = linear(head_name, {input}, g.act(), seq, width, vocab, bias, ShardKind::vocab);
  if (tied) {
    head.params -= width * vocab;
    head.tied_params = width * vocab;
  }
  head.compute = op_compute(OpFn::linear, {seq, vocab}, bias);
  const int h = g.add(std::move(head));
  Op loss = cross_entropy(loss_name, ShardKind::vocab, {h}, g.act(), seq, vocab);
  loss.compute = op_compute(OpFn::cross_entropy, {1});
  return g.add(std::move(loss));
}

}  // namespace hetplan::model::detail
