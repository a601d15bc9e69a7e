// A device's peak memory for every layer range a pipeline stage could hold, in constant time per
// range: stage_memory's sums over layers become prefix sums, its largest recomputed layer and
// gathered weights range maxima (sparse tables). Built once per device setting in O(ops + L log L)
// where stage_memory costs O(ops in the range) per range; a pipeline planner asks about O(L log L)
// ranges per setting.
#pragma once

#include <vector>

#include "hetplan/core/units.h"
#include "hetplan/cost/memory_cost.h"
#include "hetplan/model/model.h"

namespace hetplan::cost {

// The largest of values[a..b) in O(1) after O(n log n) set-up (0 for an empty range, and for
// every range of a default-constructed one).
class RangeMax {
 public:
  RangeMax() = default;
  explicit RangeMax(std::vector<double> values);
  double of(int a, int b) const;

 private:
  std::vector<std::vector<double>> levels_;  // levels_[k][i]: max of values[i .. i + 2^k)
};

class StageMemoryTable {
 public:
  // cfg: the device's setting (its layer range and gathered_weights unused). gathered_by_layer:
  // per layer, the weights a stage holding it gathers whole for a pass (the stage's largest counts,
  // as MemoryConfig::gathered_weights); empty for none.
  StageMemoryTable(const model::Model& m, const MemoryConfig& cfg,
                   const std::vector<Bytes>& gathered_by_layer = {});
  // stage_memory of cfg over layers [first, first + count), up to rounding (sums differ in order).
  MemoryBreakdown at(int first, int count) const;
  int layers() const { return static_cast<int>(params_.size()) - 1; }

 private:
  const model::Model* m_;
  MemoryConfig cfg_;
  std::vector<double> params_, tied_, stored_;  // prefix sums over layers
  RangeMax working_, transient_, gathered_, layer_;  // layer_: a layer's params and tied copy
  int table_layer_;  // tied_table_layer(model)
};

}  // namespace hetplan::cost
