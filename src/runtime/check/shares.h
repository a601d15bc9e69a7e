// Internal to the runtime, free of libtorch: how uneven shares split whole units (heads, MLP
// columns, vocabulary rows, sequence positions, samples) between the ranks of a group.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hetplan/core/error.h"

namespace hetplan::runtime::detail {

// A rank's place in a group that splits units by shares.
struct SharePlace {
  int rank = 0;
  int size = 1;
  std::vector<double> shares;  // per rank, sum 1; empty: even
};

// How many of the `n` units each rank of the group holds: counts by the shares, rounded by largest
// remainder (ties to the lower rank); a rank may get none.
std::vector<std::int64_t> share_counts(std::int64_t n, const SharePlace& tp);
// share_counts of the `n` units where every rank must get at least one; `what` names the units in
// the error.
Result<std::vector<std::int64_t>> unit_counts(std::int64_t n, const SharePlace& tp,
                                              const std::string& what);
// [begin, end) of those that rank `tp.rank` holds.
Result<std::pair<std::int64_t, std::int64_t>> unit_range(std::int64_t n, const SharePlace& tp,
                                                         const std::string& what);

}  // namespace hetplan::runtime::detail
