// Megatron-style strategy shorthand, e.g.
//   dp=8,tp=8,pp=12,mbs=1,gbs=1536,recompute=full,zero=1,schedule=interleaved,vpp=3,sp=1
// turned into a Plan on a given model and cluster. Ranks are laid out as Megatron-LM does:
// tensor-parallel ranks innermost (consecutive devices, so inside a node), then data parallel,
// then pipeline: device = pp_rank * (dp * tp) + dp_rank * tp + tp_rank over devices 0..N-1.
//
// Layers: the transformer blocks are split evenly over pp * vpp chunks (chunk c runs on pipeline
// rank c % pp); layers before the first block (embeddings) join the first chunk, layers after the
// last block (head, loss) the last chunk, and any other layer goes with the block before it.
// Models without transformer blocks (CNNs) are split by layer count. With vpp > 1 the chunks must
// divide the blocks exactly (as in Megatron-LM); with vpp = 1 a remainder r is spread one block
// each over chunks 1..r, so the first stage (embedding, and the most in-flight activations under
// 1F1B) keeps the smallest share and the last stage (the LM head) gets an extra block only when
// every middle stage has one.
//
// Omitted keys: tp=1, pp=1, vpp=1, mbs=1, dp = floor(devices / (tp * pp)) (the remaining devices
// stay idle), gbs = dp * mbs * (pp == 1 ? 1 : 4 * pp) (4 micro-batches per pipeline stage keep the
// 1F1B bubble (pp-1)/m under 25% and suit the interleaved schedule), recompute=none,
// attention=plain (flash, flash1: the attention core as one fused kernel, cost::Attention),
// overlap=none (tp, param or tp+param: the collectives the engine overlaps, Plan::overlap), zero=0,
// schedule=1f1b (interleaved when vpp > 1), sp=0, bn=local (bn=synced: batch normalisation over
// each whole micro-batch, Plan::batch_norm), grad_priority=none, loss_bound=0, multipath=ecmp,
// precision unset (the model's dtype; Plan::precision), adam=fused (foreach or per-tensor: how the
// engine runs the Adam step, Plan::adam), loss=unfused (fused: one kernel per pass, Plan::loss),
// metrics=0 (losses the engine computes again per micro-batch for its metrics, Plan::metrics).
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
  cost::Attention attention = cost::Attention::plain;  // attention=plain|flash|flash1
  std::optional<model::DType> precision;               // precision=bf16|fp16|fp32|tf32 (Plan's)
  cost::AdamKernels adam = cost::AdamKernels::fused;   // adam=fused|foreach|per-tensor
  cost::Loss loss = cost::Loss::unfused;               // loss=unfused|fused
  int metrics = 0;                                     // metrics=0..8 (Plan's)
  Overlap overlap = Overlap::none;                     // overlap=none|tp|param|tp+param
  int zero = 0;
  Schedule schedule = Schedule::one_f_one_b;
  bool schedule_given = false;
  bool sp = false;
  BatchNormStats bn = BatchNormStats::local;
  // DLCP (plan.h): grad_priority=none|layer|layer+magnitude, loss_bound=F, multipath=ecmp|spray.
  GradPriority grad_priority = GradPriority::none;
  double loss_bound = 0;
  Multipath multipath = Multipath::ecmp;
  auto operator<=>(const Strategy&) const = default;
};

// The canonical text: every key in the order dp, tp, pp, vpp, mbs, gbs, recompute, zero, schedule,
// sp, attention, precision, adam, loss, metrics, overlap, bn, grad_priority, loss_bound, multipath;
// dp and gbs left out while 0 (unresolved), the last ten while at their defaults (precision while
// unset). parse_strategy(to_string(s)) == s up to schedule_given.
std::string to_string(const Strategy& s);

// Parses the shorthand; `source` names the argument ("--strategy") in errors.
Result<Strategy> parse_strategy(std::string_view text, std::string_view source = "--strategy");

// Lays the strategy out on the model and cluster; errors name `source` and the key. The plan's
// planner field is "strategy:" + the canonical text of the resolved strategy (dp and gbs filled).
Result<Plan> plan_from_strategy(const Strategy& s, const model::Model& m, const cluster::Cluster& c,
                                std::string_view source = "--strategy");

}  // namespace hetplan::plan
