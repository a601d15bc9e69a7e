#include "search_space.h"

namespace hetplan::search {

plan::Plan base_plan(const Context& ctx, const std::string& planner) {
  plan::Plan p;
  p.model = ctx.model.name;
  p.cluster = ctx.cluster.reference_or_name();
  p.planner = planner;
  p.global_batch = ctx.options.global_batch;
  p.attention = ctx.options.attention;
  p.precision = ctx.options.precision;
  p.adam = ctx.options.adam;
  p.loss = ctx.options.loss;
  p.metrics = ctx.options.metrics;
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

bool same_replica_class(const cluster::Cluster& c, const plan::Replica& a, const plan::Replica& b) {
  if (a.tp_shares != b.tp_shares || a.devices.size() != b.devices.size() || a.devices.empty() ||
      c.group_of(a.devices.front()) != c.group_of(b.devices.front()))
    return false;
  bool a_one_node = true, b_one_node = true;
  for (std::size_t j = 0; j < a.devices.size(); ++j) {
    if (c.devices[a.devices[j]].type != c.devices[b.devices[j]].type) return false;
    a_one_node = a_one_node && c.same_node(a.devices[j], a.devices.front());
    b_one_node = b_one_node && c.same_node(b.devices[j], b.devices.front());
  }
  return a_one_node == b_one_node;
}

}  // namespace hetplan::search
