#include "hetplan/model/model.h"

#include <algorithm>

namespace hetplan::model {

std::int64_t Model::parameters() const {
  std::int64_t n = 0;
  for (const Op& op : ops) n += op.params;
  return n;
}

std::int64_t Model::layer_parameters(int layer) const {
  const Layer& l = layers[layer];
  std::int64_t n = 0;
  for (int op = l.first_op; op < l.first_op + l.num_ops; ++op) n += ops[op].params;
  return n;
}

int Model::tied_owner() const {
  for (std::size_t i = 0; i < ops.size(); ++i)
    if (ops[i].kind == OpKind::embedding && ops[i].shard == ShardKind::vocab)
      return static_cast<int>(i);
  return -1;
}

int Model::tied_reader() const {
  if (tied_owner() < 0) return -1;
  for (int i = static_cast<int>(ops.size()) - 1; i >= 0; --i)
    if (ops[i].tied_params > 0) return i;
  return -1;
}

int Model::layer_of(int op) const {
  const auto after = std::upper_bound(layers.begin(), layers.end(), op,
                                      [](int o, const Layer& l) { return o < l.first_op; });
  if (after == layers.begin()) return -1;
  const Layer& l = *(after - 1);
  return op < l.first_op + l.num_ops ? static_cast<int>(after - 1 - layers.begin()) : -1;
}

double Model::output_bytes(int op) const {
  const Op& o = ops[op];
  return o.output_bytes > 0 ? o.output_bytes : o.bytes_written;
}

double Model::layer_output_bytes(int layer) const {
  const Layer& l = layers[layer];
  return output_bytes(l.first_op + l.num_ops - 1);
}

double Model::forward_flops_per_sample() const {
  double f = 0;
  for (const Op& op : ops) f += op.flops;
  return f;
}

bool Model::causal_attention() const {
  return family == Family::decoder_lm || family == Family::moe_lm;
}

bool Model::is_language_model() const {
  return family == Family::decoder_lm || family == Family::encoder || family == Family::moe_lm;
}

}  // namespace hetplan::model
