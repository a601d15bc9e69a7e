#include "hetplan/plan/plan.h"

namespace hetplan::plan {

int stage_of_layer(const Plan& p, int layer) {
  for (std::size_t s = 0; s < p.stages.size(); ++s)
    if (layer >= p.stages[s].first_layer &&
        layer < p.stages[s].first_layer + p.stages[s].num_layers)
      return static_cast<int>(s);
  return -1;
}

}  // namespace hetplan::plan
