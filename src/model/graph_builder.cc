#include "graph_builder.h"

#include <algorithm>
#include <cassert>
#include <utility>

namespace hetplan::model::detail {

void GraphBuilder::begin_layer(std::string name, LayerKind kind) {
  Layer l;
  l.name = std::move(name);
  l.kind = kind;
  l.first_op = static_cast<int>(m_.ops.size());
  m_.layers.push_back(std::move(l));
}

int GraphBuilder::add(Op op) {
  assert(!m_.layers.empty());
  const int index = static_cast<int>(m_.ops.size());
  assert(std::all_of(op.inputs.begin(), op.inputs.end(),
                     [&](int in) { return in >= 0 && in < index; }));
  op.layer = static_cast<int>(m_.layers.size()) - 1;
  m_.ops.push_back(std::move(op));
  ++m_.layers.back().num_ops;
  return index;
}

OpCompute op_compute(OpFn fn, std::vector<std::int64_t> shape, bool bias, double drop) {
  OpCompute c;
  c.fn = fn;
  c.shape = std::move(shape);
  c.bias = bias;
  c.drop = drop;
  return c;
}

Op linear(std::string name, std::vector<int> inputs, double act, std::int64_t tokens,
          std::int64_t in, std::int64_t out, bool bias, ShardKind shard) {
  Op op;
  op.name = std::move(name);
  op.kind = OpKind::matmul;
  op.shard = shard;
  op.inputs = std::move(inputs);
  const double t = static_cast<double>(tokens);
  op.flops = 2.0 * t * static_cast<double>(in) * static_cast<double>(out) +
             (bias ? kAddFlops * t * static_cast<double>(out) : 0.0);
  op.bytes_read = act * t * static_cast<double>(in);
  op.bytes_written = act * t * static_cast<double>(out);
  op.params = in * out + (bias ? out : 0);
  op.gemm = GemmShape{tokens, out, in, 1};
  return op;
}

Op pointwise(std::string name, OpKind kind, ShardKind shard, std::vector<int> inputs, double act,
             double elements, double flops_per_element, int operands) {
  Op op;
  op.name = std::move(name);
  op.kind = kind;
  op.shard = shard;
  op.inputs = std::move(inputs);
  op.flops = flops_per_element * elements;
  op.bytes_read = act * elements * operands;
  op.bytes_written = act * elements;
  return op;
}

Op batched_matmul(std::string name, std::vector<int> inputs, double act, std::int64_t batch,
                  std::int64_t m, std::int64_t n, std::int64_t k) {
  Op op;
  op.name = std::move(name);
  op.kind = OpKind::batched_matmul;
  op.shard = ShardKind::heads;
  op.inputs = std::move(inputs);
  const double b = static_cast<double>(batch), dm = static_cast<double>(m),
               dn = static_cast<double>(n), dk = static_cast<double>(k);
  op.flops = 2.0 * b * dm * dn * dk;
  op.bytes_read = act * b * (dm * dk + dk * dn);
  op.bytes_written = act * b * dm * dn;
  op.gemm = GemmShape{m, n, k, batch};
  return op;
}

Op norm(std::string name, OpKind kind, std::vector<int> inputs, double act, std::int64_t tokens,
        std::int64_t width) {
  const bool layernorm = kind == OpKind::layernorm;
  const double elements = static_cast<double>(tokens) * static_cast<double>(width);
  Op op = pointwise(std::move(name), kind, ShardKind::replicated, std::move(inputs), act, elements,
                    layernorm ? kLayerNormFlops : kRmsNormFlops);
  op.params = layernorm ? 2 * width : width;
  return op;
}

Op cross_entropy(std::string name, ShardKind shard, std::vector<int> inputs, double act,
                 std::int64_t tokens, std::int64_t classes) {
  const double logits = static_cast<double>(tokens) * static_cast<double>(classes);
  Op op = pointwise(std::move(name), OpKind::cross_entropy, shard, std::move(inputs), act, logits,
                    kCrossEntropyFlops);
  op.bytes_written = kFp32Bytes * static_cast<double>(tokens);  // one loss per token
  op.saved_bytes = kFp32Bytes * logits;
  return op;
}

Op dropout(std::string name, ShardKind shard, std::vector<int> inputs, double act,
           double elements) {
  Op op = pointwise(std::move(name), OpKind::elementwise, shard, std::move(inputs), act, elements,
                    kDropoutFlops);
  op.output_bytes = op.bytes_written;
  op.bytes_written += kMaskBytes * elements;
  op.saved_bytes = kMaskBytes * elements;
  return op;
}

}  // namespace hetplan::model::detail
