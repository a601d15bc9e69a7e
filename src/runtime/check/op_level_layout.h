// Internal to the runtime, free of libtorch: who runs what in an op-level plan (each op's group,
// each group's ranks and shares), and whether the runtime executes such a plan.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "hetplan/core/error.h"
#include "hetplan/model/model.h"
#include "hetplan/plan/plan.h"
#include "shares.h"

namespace hetplan::runtime::detail {

// The plan's devices, ascending: rank k runs the k-th.
std::vector<int> op_level_devices(const plan::Plan& p);

// Whether run_op_level executes op-level plan p of m on world_size ranks, or why not.
Result<bool> check_op_level(const model::Model& m, const plan::Plan& p, int world_size);

// Rows [lo, hi) cut into consecutive intervals by `weights` (share_counts' rounding).
std::vector<std::pair<std::int64_t, std::int64_t>> cut_rows(std::int64_t lo, std::int64_t hi,
                                                            const std::vector<double>& weights);

// Who runs what: ranks of the plan's devices, each op's group, each group's ranks and shares.
struct OpLevelLayout {
  std::vector<int> devices;                 // rank -> device
  std::vector<int> group;                   // op -> group
  std::vector<std::vector<int>> members;    // group -> its devices' ranks, in the group's order
  std::vector<std::vector<double>> shares;  // group -> each member's share of a micro-batch
  // Split groups: each member's tensor share and replica, each replica's share of a micro-batch,
  // and per replica its members in ascending rank order (the order of their shards in the
  // replica's collectives); other groups: one replica of all members.
  std::vector<bool> split;
  std::vector<std::vector<double>> tensor_shares;
  std::vector<std::vector<int>> replica;
  std::vector<std::vector<double>> replica_shares;
  std::vector<std::vector<std::vector<int>>> by_rank;  // group -> replica -> member indices
  // Split groups of several replicas that split alike (plan::replica_places): the member at each
  // place of every replica (by_rank's q-th, as ranks follow device ids) holds the same slices.
  std::vector<bool> aligned;
  // Per group, the first group laid out as it (plan::same_split_layout; itself when none): ops of
  // split groups of one layout pass activations as inside one group.
  std::vector<std::size_t> layout_id;

  OpLevelLayout(const model::Model& m, const plan::Plan& p);
  // Member j of split group g's place in its replica: the replica's size and tensor shares (in
  // ascending rank order) and j's rank among them, without a process group.
  SharePlace replica_place(std::size_t g, int j) const {
    SharePlace tp;
    const auto& order =
        by_rank[g][static_cast<std::size_t>(replica[g][static_cast<std::size_t>(j)])];
    tp.size = static_cast<int>(order.size());
    for (std::size_t i = 0; i < order.size(); ++i) {
      tp.shares.push_back(tensor_shares[g][static_cast<std::size_t>(order[i])]);
      if (order[i] == j) tp.rank = static_cast<int>(i);
    }
    return tp;
  }
  // Whether op `op`'s output reaches group g's ops as inside one group.
  bool together(std::size_t op, std::size_t g) const {
    return layout_id[static_cast<std::size_t>(group[op])] == layout_id[g];
  }
  // The rows [begin, end) of the global batch each member of group g holds in micro-batch k (in a
  // split group: all of its replica's).
  std::vector<std::pair<std::int64_t, std::int64_t>> rows(const plan::Plan& p, int g, int k) const {
    const auto [lo, hi] = batch_rows(p, k);
    if (!split[g]) return cut_rows(lo, hi, shares[g]);
    const auto reps = cut_rows(lo, hi, replica_shares[g]);
    std::vector<std::pair<std::int64_t, std::int64_t>> out;
    for (int r : replica[g]) out.push_back(reps[static_cast<std::size_t>(r)]);
    return out;
  }
  // The rows each member of group g answers for in transfers between groups: its rows, or in a
  // split group, whose members all hold their replica's rows, an interval of them by its tensor
  // share (in ascending rank order).
  std::vector<std::pair<std::int64_t, std::int64_t>> part_rows(const plan::Plan& p, int g,
                                                               int k) const {
    if (!split[g]) return rows(p, g, k);
    const auto [lo, hi] = batch_rows(p, k);
    const auto reps = cut_rows(lo, hi, replica_shares[g]);
    std::vector<std::pair<std::int64_t, std::int64_t>> out(members[g].size());
    for (std::size_t r = 0; r < reps.size(); ++r) {
      std::vector<double> weights;
      for (int j : by_rank[g][r]) weights.push_back(tensor_shares[g][static_cast<std::size_t>(j)]);
      const auto parts = cut_rows(reps[r].first, reps[r].second, weights);
      for (std::size_t i = 0; i < parts.size(); ++i)
        out[static_cast<std::size_t>(by_rank[g][r][i])] = parts[i];
    }
    return out;
  }
  static std::pair<std::int64_t, std::int64_t> batch_rows(const plan::Plan& p, int k) {
    const std::int64_t B = p.global_batch, M = std::max(1, p.num_microbatches);
    return {B * k / M, B * (k + 1) / M};
  }
  // This rank's index among group g's members; -1 when it is not one.
  static int index_in(const std::vector<int>& ranks, int rank) {
    const auto it = std::find(ranks.begin(), ranks.end(), rank);
    return it == ranks.end() ? -1 : static_cast<int>(it - ranks.begin());
  }
  // The ranks of replica r of group g in ascending order.
  std::vector<int> replica_ranks(std::size_t g, std::size_t r) const {
    std::vector<int> out;
    for (int j : by_rank[g][r]) out.push_back(members[g][static_cast<std::size_t>(j)]);
    return out;
  }
};

}  // namespace hetplan::runtime::detail
