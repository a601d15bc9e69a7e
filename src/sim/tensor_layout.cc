#include "hetplan/sim/tensor_layout.h"

namespace hetplan::sim {

const char* to_string(Layout l) {
  switch (l) {
    case Layout::replicated:
      return "replicated";
    case Layout::feature:
      return "feature";
    case Layout::partial:
      return "partial";
    case Layout::sequence:
      return "sequence";
    case Layout::batch:
      return "batch";
  }
  return "?";
}

OpLayout op_layout(const model::Op& o, plan::SplitKind split, bool sequence_parallel) {
  using L = Layout;
  if (split == plan::SplitKind::replicate) return {L::replicated, L::replicated, L::replicated};
  if (split == plan::SplitKind::batch || split == plan::SplitKind::batch_sharded)
    return {L::batch, L::batch, L::batch};
  switch (o.shard) {
    case model::ShardKind::replicated:
      return sequence_parallel ? OpLayout{L::sequence, L::sequence, L::sequence}
                               : OpLayout{L::replicated, L::replicated, L::replicated};
    case model::ShardKind::column:
    case model::ShardKind::channel:
      return {L::replicated, L::feature, L::partial};
    case model::ShardKind::heads:
      return {L::feature, L::feature, L::feature};
    case model::ShardKind::row:
      return {L::feature, L::partial, L::feature};
    case model::ShardKind::vocab:
      // The input embedding's vocabulary shards give partial sums; the LM head splits its output
      // (logits) by vocabulary like a column split; the loss reads those shards.
      if (o.kind == model::OpKind::embedding) return {L::replicated, L::partial, L::replicated};
      if (o.kind == model::OpKind::cross_entropy) return {L::feature, L::replicated, L::feature};
      return {L::replicated, L::feature, L::partial};
    case model::ShardKind::expert:
      return {L::replicated, L::replicated, L::replicated};
  }
  return {};
}

bool computes_whole(const model::Op& o, plan::SplitKind split, bool sequence_parallel) {
  return split == plan::SplitKind::replicate ||
         (split == plan::SplitKind::tensor && o.shard == model::ShardKind::replicated &&
          !sequence_parallel);
}

bool holds_whole_weights(const model::Op& o, plan::SplitKind split) {
  if (split == plan::SplitKind::batch_sharded) return false;
  return split != plan::SplitKind::tensor || o.shard == model::ShardKind::replicated;
}

std::optional<cost::Collective> conversion(Layout from, Layout to) {
  if (from == to || from == Layout::replicated) return std::nullopt;
  if (from == Layout::partial)
    return to == Layout::replicated ? cost::Collective::all_reduce
                                    : cost::Collective::reduce_scatter;
  if (to == Layout::replicated) return cost::Collective::all_gather;
  if (to == Layout::partial) return std::nullopt;  // a shard is a partial sum padded with zeros
  return cost::Collective::all_to_all;
}

Layout gradient_layout(Layout output) {
  return output == Layout::partial ? Layout::replicated : output;
}

}  // namespace hetplan::sim
