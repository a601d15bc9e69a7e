#include "hetplan/cost/memory_table.h"

#include <bit>
#include <cassert>

namespace hetplan::cost {

RangeMax::RangeMax(std::vector<double> values) {
  const std::size_t n = values.size();
  levels_.push_back(std::move(values));
  for (std::size_t len = 2; len <= n; len *= 2) {
    const std::vector<double>& below = levels_.back();
    std::vector<double> level(n - len + 1);
    for (std::size_t i = 0; i < level.size(); ++i)
      level[i] = std::max(below[i], below[i + len / 2]);
    levels_.push_back(std::move(level));
  }
}

double RangeMax::of(int a, int b) const {
  if (b <= a || levels_.empty()) return 0;
  assert(a >= 0 && static_cast<std::size_t>(b) <= levels_.front().size());
  const int k = std::bit_width(static_cast<unsigned>(b - a)) - 1;
  const std::vector<double>& level = levels_[static_cast<std::size_t>(k)];
  return std::max(level[static_cast<std::size_t>(a)],
                  level[static_cast<std::size_t>(b - (1 << k))]);
}

StageMemoryTable::StageMemoryTable(const model::Model& m, const MemoryConfig& cfg,
                                   const std::vector<Bytes>& gathered_by_layer)
    : m_(&m), cfg_(cfg), table_layer_(tied_table_layer(m)) {
  const int L = static_cast<int>(m.layers.size());
  assert(gathered_by_layer.empty() || static_cast<int>(gathered_by_layer.size()) == L);
  params_.assign(L + 1, 0);
  tied_.assign(L + 1, 0);
  stored_.assign(L + 1, 0);
  std::vector<double> working(L), transient(L), gathered(L, 0), layer(L);
  for (int l = 0; l < L; ++l) {
    const LayerMemory lm = layer_memory(m, cfg, l);
    params_[l + 1] = params_[l] + lm.params;
    tied_[l + 1] = tied_[l] + lm.tied_copy;
    stored_[l + 1] = stored_[l] + lm.stored_per_sample;
    working[l] = lm.working_per_sample;
    transient[l] = lm.transient_per_sample;
    layer[l] = lm.params + lm.tied_copy;
    if (!gathered_by_layer.empty()) gathered[l] = gathered_by_layer[l].value;
  }
  // Only full recomputation has a working set, only split ops gather weights: the rest is 0.
  if (cfg.recompute == Recompute::full) working_ = RangeMax(std::move(working));
  if (!gathered_by_layer.empty()) gathered_ = RangeMax(std::move(gathered));
  transient_ = RangeMax(std::move(transient));
  layer_ = RangeMax(std::move(layer));
  cfg_.whole_params.clear();  // read above; the breakdown needs none of them
  cfg_.whole_activations.clear();
  cfg_.split_inputs.clear();
}

MemoryBreakdown StageMemoryTable::at(int first, int count) const {
  assert(first >= 0 && count >= 0 && first + count <= layers());
  const int end = first + count;
  StageMemoryParts parts;
  parts.params = params_[end] - params_[first];
  if (table_layer_ < first || table_layer_ >= end) parts.tied_copy = tied_[end] - tied_[first];
  parts.activations.stored_per_sample = stored_[end] - stored_[first];
  parts.activations.working_set_per_sample = working_.of(first, end);
  parts.activations.transient_per_sample = transient_.of(first, end);
  parts.largest_layer = count > 0 ? layer_.of(first, end) : 0.0;
  return stage_memory(m_->dtype, cfg_, parts, Bytes(gathered_.of(first, end)));
}

}  // namespace hetplan::cost
