// Megatron-style strategy shorthand, e.g.
//   dp=8,tp=8,pp=12,mbs=1,gbs=1536,recompute=full,zero=1,schedule=interleaved,vpp=3,sp=1
// turned into a Plan on a given model and cluster. Ranks are laid out as Megatron-LM does:
// tensor-parallel ranks innermost (consecutive devices, so inside a node), then data parallel,
// then pipeline: device = pp_rank * (dp * tp) + dp_rank * tp + tp_rank. Layers are split evenly
// over pp * vpp chunks (the embedding goes with the first chunk, the head with the last).
// Omitted keys: tp=1, pp=1, dp = devices / (tp * pp), mbs=1, gbs = dp * mbs * pp (or 8 * dp * mbs),
// recompute=none, zero=0, schedule=1f1b (interleaved when vpp>1), sp=0.
#pragma once

#include <string>
#include <string_view>

#include "hetplan/cluster/cluster.h"
#include "hetplan/core/error.h"
#include "hetplan/model/model.h"
#include "hetplan/plan/plan.h"

namespace hetplan::plan {

struct Strategy {
  int dp = 0;  // 0 = fill the cluster
  int tp = 1;
  int pp = 1;
  int vpp = 1;
  double mbs = 1;
  std::int64_t gbs = 0;  // 0 = default
  cost::Recompute recompute = cost::Recompute::none;
  int zero = 0;
  Schedule schedule = Schedule::one_f_one_b;
  bool schedule_given = false;
  bool sp = false;
  auto operator<=>(const Strategy&) const = default;
};

// Parses the shorthand; `source` names the argument ("--strategy") in errors.
Result<Strategy> parse_strategy(std::string_view text, std::string_view source = "--strategy");

// Lays the strategy out on the model and cluster; errors name `source` and the key.
Result<Plan> plan_from_strategy(const Strategy& s, const model::Model& m, const cluster::Cluster& c,
                                std::string_view source = "--strategy");

}  // namespace hetplan::plan
