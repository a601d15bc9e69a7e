// A stage plan as the uniform tp x dp x pp grid that Megatron-LM and DeepSpeed launch.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "export_parts.h"

namespace hetplan::plan::detail {
namespace {

// The transformer blocks of a stage (for models without them, its layers other than the
// embedding and the head).
int blocks_of(const Stage& st, const model::Model& m) {
  int transformer = 0, other = 0;
  for (int l = st.first_layer; l < st.first_layer + st.num_layers; ++l) {
    const auto kind = m.layers[static_cast<std::size_t>(l)].kind;
    if (kind == model::LayerKind::transformer) ++transformer;
    if (kind != model::LayerKind::embedding && kind != model::LayerKind::head) ++other;
  }
  return m.num_blocks > 0 && m.family != model::Family::cnn ? transformer : other;
}

std::string shares_text(const std::vector<double>& shares) {
  std::vector<std::string> parts;
  for (double s : shares) parts.push_back(fmt::format("{:.3g}", s));
  return fmt::format("{}", fmt::join(parts, "/"));
}

bool uneven(const std::vector<double>& shares) {
  return std::any_of(shares.begin(), shares.end(), [&](double s) {
    return std::abs(s - 1.0 / static_cast<double>(shares.size())) > 1e-9;
  });
}

}  // namespace

Grid plan_grid(const Plan& p, const model::Model& m, const std::string& engine,
               std::vector<std::string>& differences) {
  Grid g;
  g.global_batch = p.global_batch;
  if (p.stages.empty()) return g;  // (validation refuses a stage plan without stages)
  // Device groups in pipeline order: stages whose replicas use the same devices run on one.
  std::vector<std::set<int>> group_sets;
  std::vector<std::vector<int>> group_devices;  // replicas in order, each in tp-rank order
  std::map<int, int> degrees;                   // tensor-parallel degree -> replicas
  for (const auto& st : p.stages) {
    std::vector<int> flat;
    for (const auto& r : st.replicas) {
      flat.insert(flat.end(), r.devices.begin(), r.devices.end());
      ++degrees[static_cast<int>(r.devices.size())];
    }
    const std::set<int> key(flat.begin(), flat.end());
    if (std::find(group_sets.begin(), group_sets.end(), key) == group_sets.end()) {
      group_sets.push_back(key);
      group_devices.push_back(flat);
    }
    g.blocks_per_stage.push_back(blocks_of(st, m));
  }
  if (degrees.empty()) return g;  // (nor one without replicas)
  g.pp = static_cast<int>(group_devices.size());
  g.vpp = static_cast<int>(p.stages.size()) / g.pp;

  // One tensor-parallel degree: the most common (the smaller on a tie).
  g.tp = degrees.begin()->first;
  for (const auto& [degree, count] : degrees)
    if (count > degrees.at(g.tp)) g.tp = degree;
  if (degrees.size() > 1) {
    std::vector<std::string> parts;
    for (const auto& [degree, count] : degrees)
      parts.push_back(fmt::format("tp {} on {} replica(s)", degree, count));
    differences.push_back(fmt::format(
        "tensor-parallel degrees differ between replicas or stages ({}): {} has one degree; "
        "written: tp={}",
        fmt::join(parts, ", "), engine, g.tp));
  }
  // Every pipeline stage gets the same devices: the fewest any stage has.
  std::vector<int> sizes;
  for (const auto& devices : group_devices) sizes.push_back(static_cast<int>(devices.size()));
  const int per_stage = *std::min_element(sizes.begin(), sizes.end());
  while (per_stage % g.tp != 0) --g.tp;
  g.dp = per_stage / g.tp;
  if (*std::max_element(sizes.begin(), sizes.end()) != per_stage)
    differences.push_back(fmt::format(
        "the pipeline stages have {} devices: {} gives every stage tp x dp of them; written: {} "
        "per stage (tp {} x dp {}), the rest idle",
        join(sizes), engine, per_stage, g.tp, g.dp));
  for (const auto& devices : group_devices)
    g.rank_devices.insert(g.rank_devices.end(), devices.begin(), devices.begin() + per_stage);

  for (std::size_t s = 0; s < p.stages.size(); ++s) {
    const auto& st = p.stages[s];
    std::vector<double> batch;
    const Replica* uneven_tp = nullptr;  // the stage's first replica with uneven tp shares
    for (const auto& r : st.replicas) {
      batch.push_back(r.batch_share);
      if (!uneven_tp && r.tp_shares.size() > 1 && uneven(r.tp_shares)) uneven_tp = &r;
    }
    if (uneven_tp)
      differences.push_back(fmt::format(
          "stage {} splits tensors unevenly ({} over devices {}): {} splits them evenly", s,
          shares_text(uneven_tp->tp_shares), join(uneven_tp->devices), engine));
    if (batch.size() > 1 && uneven(batch))
      differences.push_back(fmt::format(
          "stage {} gives its replicas uneven batch shares ({}): {} gives every replica the same "
          "micro-batch",
          s, shares_text(batch), engine));
  }

  // The batch: the plan's rounds of micro-batches, each split over dp replicas.
  const std::int64_t gbs = p.global_batch, rounds = p.num_microbatches, dp = g.dp;
  g.global_batch = gbs;
  if (gbs % (rounds * dp) == 0) {
    g.micro_batch = static_cast<int>(gbs / (rounds * dp));
  } else {
    std::int64_t mbs = std::max<std::int64_t>(1, gbs / (rounds * dp));
    while (mbs > 1 && gbs % (mbs * dp) != 0) --mbs;
    if (gbs % (mbs * dp) != 0) g.global_batch = std::max(dp, gbs / dp * dp);
    g.micro_batch = static_cast<int>(mbs);
    differences.push_back(fmt::format(
        "the plan's {} micro-batch rounds of {} samples do not split evenly over dp {}: written "
        "global batch {}, micro-batch {} per replica, {} micro-batches",
        rounds, gbs, dp, g.global_batch, mbs, g.global_batch / (mbs * dp)));
  }
  g.accumulation = static_cast<int>(g.global_batch / (g.micro_batch * dp));
  return g;
}

void add_overlap_difference(const Plan& p, const std::string& engine,
                            std::vector<std::string>& differences) {
  if (p.overlap == Overlap::none) return;
  differences.push_back(fmt::format(
      "overlap {}: {} runs these collectives without overlapping them with computation, so "
      "steps take longer than the plan's predicted time",
      to_string(p.overlap), engine));
}

void add_adam_difference(const Plan& p, const std::string& engine,
                         std::vector<std::string>& differences) {
  if (p.adam == cost::AdamKernels::fused) return;
  differences.push_back(fmt::format(
      "adam {}: {} steps Adam with one fused multi-tensor kernel, so steps take less than the "
      "plan's predicted time",
      adam_name(p.adam), engine));
}

void add_metrics_difference(const Plan& p, const std::string& engine,
                            std::vector<std::string>& differences) {
  if (p.metrics == 0) return;
  differences.push_back(fmt::format(
      "metrics {}: {} computes no training metrics from the logits, so steps take less than the "
      "plan's predicted time",
      p.metrics, engine));
}

void add_sync_differences(const Plan& p, const std::string& engine,
                          std::vector<std::string>& differences) {
  for (const auto& rule : p.grad_sync)
    if (rule.method != SyncMethod::all_reduce)
      differences.push_back(
          fmt::format("the gradients of {} synchronise by {}: {} all-reduces "
                      "every gradient",
                      rule.ops, to_string(rule.method), engine));
  if (p.grad_priority != GradPriority::none)
    differences.push_back(fmt::format("grad_priority={}: {} sends gradients in its buckets' order",
                                      to_string(p.grad_priority), engine));
  if (p.loss_bound > 0)
    differences.push_back(
        fmt::format("loss_bound={}: {} drops no gradients", p.loss_bound, engine));
  if (p.multipath == Multipath::spray)
    differences.push_back(
        fmt::format("multipath=spray: {} leaves the choice of routes to the network", engine));
  for (const auto& o : p.op_overrides)
    if (o.split != SplitKind::tensor)
      differences.push_back(
          fmt::format("the ops {} are split by {}: {} splits every layer's ops its own way", o.ops,
                      to_string(o.split), engine));
}

}  // namespace hetplan::plan::detail
