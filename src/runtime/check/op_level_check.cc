#include <fmt/format.h>

#include <algorithm>

#include "hetplan/plan/op_groups.h"
#include "op_graph_check.h"
#include "op_level_layout.h"
#include "split_rules.h"

namespace hetplan::runtime::detail {

Result<bool> check_op_level(const model::Model& m, const plan::Plan& p, int world_size) {
  if (auto ok = check_op_graph(m); !ok) return ok.error();
  const auto devices = op_level_devices(p);
  if (static_cast<int>(devices.size()) != world_size)
    return Error{fmt::format(
        "plan: op_groups: the plan runs on {} devices (one rank each) but the job has {} ranks "
        "(start it with --nprocs {}, or as {} torchrun ranks)",
        devices.size(), world_size, devices.size(), devices.size())};
  const std::vector<int> group = plan::group_of_ops(p, m);
  for (std::size_t i = 0; i < m.ops.size(); ++i)
    if (group[i] < 0)
      return Error{fmt::format("plan: op_groups: no group names op \"{}\"", m.ops[i].name)};
  // Plans converted from stage plans are not validated as op-level plans: the same rule here.
  if (const auto device = plan::tied_groups_overlap(p, m, group))
    return Error{"plan: op_groups: " + plan::tied_overlap_message(m, group, *device)};
  if (const auto apart = plan::tied_ops_apart(m, group); apart && p.zero_stage == 1) {
    // (A rank of both groups counts the table among its table group's weights, the head group's
    // other ranks their copies among theirs: the head group's ranks would shard unlike sets.)
    const auto& table = p.op_groups[static_cast<std::size_t>(group[apart->second])].devices;
    int shared = -1, apart_only = -1;
    for (int d : p.op_groups[static_cast<std::size_t>(group[apart->first])].devices)
      (std::find(table.begin(), table.end(), d) != table.end() ? shared : apart_only) = d;
    if (shared >= 0 && apart_only >= 0)
      return Error{fmt::format(
          "plan: zero_stage: ZeRO-1 is not executed where a tied LM head's group shares some of "
          "its devices with its table's group but not all (device {} holds the table for both, "
          "device {} a copy)",
          shared, apart_only)};
  }
  if (p.zero_stage > 1)
    return Error{fmt::format(
        "plan: zero_stage: ZeRO stage {} is not executed with op-level plans yet (stage 1 is)",
        p.zero_stage)};
  const std::vector<FeatureCut> cuts = feature_cuts(m);
  const OpLevelLayout at(m, p);
  auto split = [&](std::size_t g) { return at.split[g]; };
  for (std::size_t i = 0; i < m.ops.size(); ++i) {
    const auto g = static_cast<std::size_t>(group[i]);
    const plan::OpGroup& og = p.op_groups[g];
    if (split(g))
      if (auto ok = check_split_op(m.ops[i]); !ok)
        return Error{fmt::format("plan: op_groups[{}]: {}", g, ok.error().message)};
    if (cuts[i].sections == 1) continue;
    // A QKV projection that a split group splits by heads: its rank's Q, K and V parts are read
    // as they are, by its attention core in its group (or one laid out alike), and every rank
    // holds at least one head.
    const std::string& qkv = m.ops[i].name;
    for (std::size_t c = 0; c < m.ops.size(); ++c) {
      const auto& in = m.ops[c].inputs;
      if (std::find(in.begin(), in.end(), static_cast<int>(i)) == in.end()) continue;
      const auto gc = static_cast<std::size_t>(group[c]);
      const bool together = gc == g || plan::same_split_layout(og, p.op_groups[gc]);
      if ((split(g) || split(gc)) && (!together || m.ops[c].shard != model::ShardKind::heads))
        return Error{fmt::format(
            "plan: op_groups[{}]: \"{}\" (QKV) is split by heads for its attention core, which "
            "must read it in its group (or one laid out alike); \"{}\" does not",
            split(g) ? g : gc, qkv, m.ops[c].name)};
    }
    if (!split(g)) continue;
    if (og.sync == plan::SyncMethod::sufficient_factor)
      return Error{fmt::format(
          "plan: op_groups[{}].sync: the sufficient factors of \"{}\" (QKV split by heads) are "
          "not executed; put it in a group that all-reduces",
          g, qkv)};
    const std::int64_t heads = m.ops[i].gemm.n / (cuts[i].unit * cuts[i].sections);
    for (const auto& members : at.by_rank[g]) {  // each replica's, in rank order
      const auto counts = share_counts(heads, at.replica_place(g, members.front()));
      for (std::size_t q = 0; q < counts.size(); ++q)
        if (counts[q] == 0)
          return Error{fmt::format(
              "plan: op_groups[{}].shares: device {} gets none of the {} heads of \"{}\" (a split "
              "group's devices each hold whole heads, at least one)",
              g, og.devices[static_cast<std::size_t>(members[q])], heads, qkv)};
    }
  }
  for (std::size_t g = 0; g < p.op_groups.size(); ++g)
    for (int s : p.op_groups[g].servers)
      if (std::find(p.op_groups[g].devices.begin(), p.op_groups[g].devices.end(), s) ==
          p.op_groups[g].devices.end())
        return Error{fmt::format(
            "plan: op_groups[{}].servers: device {} is not one of the group's devices", g, s)};
  return true;
}

}  // namespace hetplan::runtime::detail
