#include "split_rules.h"

#include <fmt/format.h>

namespace hetplan::runtime::detail {

using model::OpFn;
using model::ShardKind;

Result<bool> check_split_op(const model::Op& op) {
  const OpFn fn = op.compute.fn;
  const bool ok =
      op.shard == ShardKind::replicated || (fn == OpFn::conv2d && op.shard == ShardKind::channel) ||
      (fn == OpFn::linear && (op.shard == ShardKind::column || op.shard == ShardKind::row ||
                              op.shard == ShardKind::vocab)) ||
      ((fn == OpFn::cross_entropy || fn == OpFn::embedding) && op.shard == ShardKind::vocab) ||
      ((fn == OpFn::relu || fn == OpFn::gelu || fn == OpFn::tanh || fn == OpFn::dropout ||
        fn == OpFn::softmax || fn == OpFn::attention_scores || fn == OpFn::attention_context) &&
       op.shard == ShardKind::heads);
  if (ok) return true;
  return Error{fmt::format(
      "op \"{}\" ({} split by {}) is not executed in a split group yet (convolutions by channel, "
      "linear layers by column, row or vocabulary, embeddings by vocabulary, elementwise ops, "
      "softmax, attention by heads, losses by class and ops computed whole are)",
      op.name, model::to_string(op.kind), model::to_string(op.shard))};
}

std::vector<FeatureCut> feature_cuts(const model::Model& m) {
  std::vector<FeatureCut> out(m.ops.size());
  for (std::size_t i = 0; i < m.ops.size(); ++i) {
    const model::Op& op = m.ops[i];
    if (op.shard != ShardKind::heads) continue;
    // The QKV projection that the attention core reads (as its only input, or a context's second).
    const bool scores = op.compute.fn == OpFn::attention_scores;
    if (op.compute.fn == OpFn::attention_context) {
      out[i].unit = op.gemm.n;
      if (op.inputs.size() > 1) out[static_cast<std::size_t>(op.inputs[1])] = {op.gemm.n, 3};
    } else if (scores && !op.inputs.empty()) {
      out[static_cast<std::size_t>(op.inputs[0])] = {op.gemm.k, 3};
    }
  }
  // A row-split layer reading the heads of an attention context is cut by them.
  for (std::size_t i = 0; i < m.ops.size(); ++i) {
    const model::Op& op = m.ops[i];
    if (op.shard == ShardKind::row && op.inputs.size() == 1)
      if (const auto in = static_cast<std::size_t>(op.inputs[0]);
          m.ops[in].compute.fn == OpFn::attention_context)
        out[i] = out[in];
  }
  return out;
}

}  // namespace hetplan::runtime::detail
