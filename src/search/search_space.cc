#include "search_space.h"

namespace hetplan::search {

plan::Plan base_plan(const Context& ctx, const std::string& planner) {
  plan::Plan p;
  p.model = ctx.model.name;
  p.cluster = ctx.cluster.name;
  p.planner = planner;
  p.global_batch = ctx.options.global_batch;
  p.attention = ctx.options.attention;
  return p;
}

int block_count(const model::Model& m) {
  int blocks = 0;
  for (const auto& l : m.layers) blocks += l.kind == model::LayerKind::transformer;
  return blocks > 0 ? blocks : static_cast<int>(m.layers.size());
}

std::vector<cost::Recompute> recompute_modes(const model::Model& m) {
  bool attention = false;
  for (const auto& op : m.ops) attention = attention || op.attention_core;
  if (attention) return {cost::Recompute::none, cost::Recompute::selective, cost::Recompute::full};
  return {cost::Recompute::none, cost::Recompute::full};
}

std::vector<int> powers_of_two(int limit) {
  std::vector<int> out;
  for (int k = 1; k <= limit; k *= 2) out.push_back(k);
  return out;
}

bool even_tp_splits(const model::Model& m, int tp) {
  for (std::int64_t units :
       {static_cast<std::int64_t>(m.heads), static_cast<std::int64_t>(m.kv_heads),
        static_cast<std::int64_t>(m.experts)})
    if (tp > 1 && m.heads > 0 && units > 0 && units % tp != 0) return false;
  return true;
}

}  // namespace hetplan::search
