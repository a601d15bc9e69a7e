#include "hetplan/plan/op_groups.h"

#include <unordered_map>

namespace hetplan::plan {

std::vector<int> group_of_ops(const Plan& p, const model::Model& m) {
  std::vector<int> out(m.ops.size(), -1);
  std::unordered_map<std::string_view, int> by_name;
  for (std::size_t i = 0; i < m.ops.size(); ++i)
    by_name.emplace(m.ops[i].name, static_cast<int>(i));
  std::vector<std::pair<int, const std::string*>> patterns;  // (group, pattern) with a '*'
  for (std::size_t g = 0; g < p.op_groups.size(); ++g)
    for (const std::string& name : p.op_groups[g].ops) {
      if (name.find('*') != std::string::npos) {
        patterns.emplace_back(static_cast<int>(g), &name);
        continue;
      }
      auto it = by_name.find(name);
      if (it != by_name.end() && out[it->second] < 0) out[it->second] = static_cast<int>(g);
    }
  if (patterns.empty()) return out;
  for (std::size_t i = 0; i < m.ops.size(); ++i)
    for (const auto& [g, pattern] : patterns) {
      if (out[i] >= 0) break;
      if (op_pattern_matches(*pattern, m.ops[i].name)) out[i] = g;
    }
  return out;
}

double group_share(const OpGroup& g, std::size_t j) {
  if (g.mode == GroupMode::place) return 1.0;
  if (!g.shares.empty()) return g.shares[j];
  return 1.0 / static_cast<double>(g.devices.size());
}

}  // namespace hetplan::plan
