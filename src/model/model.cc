#include "hetplan/model/model.h"

namespace hetplan::model {

std::int64_t Model::parameters() const {
  std::int64_t n = 0;
  for (const Op& op : ops) n += op.params;
  return n;
}

double Model::forward_flops_per_sample() const {
  double f = 0;
  for (const Op& op : ops) f += op.flops;
  return f;
}

bool Model::is_language_model() const {
  return family == Family::decoder_lm || family == Family::encoder || family == Family::moe_lm;
}

}  // namespace hetplan::model
