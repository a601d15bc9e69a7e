#include "shares.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace hetplan::runtime::detail {

std::vector<std::int64_t> share_counts(std::int64_t n, const SharePlace& tp) {
  const int k = tp.size;
  std::vector<double> shares = tp.shares;
  if (shares.empty()) shares.assign(k, 1.0 / k);
  std::vector<std::int64_t> count(k);
  std::vector<std::pair<double, int>> rest;
  std::int64_t given = 0;
  for (int i = 0; i < k; ++i) {
    const double exact = shares[i] * static_cast<double>(n);
    count[i] = static_cast<std::int64_t>(std::floor(exact));
    given += count[i];
    rest.push_back({-(exact - std::floor(exact)), i});  // largest remainder first, then rank
  }
  std::sort(rest.begin(), rest.end());
  for (std::int64_t i = 0; i < n - given; ++i) ++count[rest[i % k].second];
  return count;
}

Result<std::vector<std::int64_t>> unit_counts(std::int64_t n, const SharePlace& tp,
                                              const std::string& what) {
  std::vector<std::int64_t> count = share_counts(n, tp);
  for (int i = 0; i < tp.size; ++i)
    if (count[i] < 1)
      return Error{fmt::format(
          "plan: tp_shares: tensor-parallel rank {} would hold none of the {} {} (share {:.3g})", i,
          n, what, tp.shares.empty() ? 1.0 / tp.size : tp.shares[i])};
  return count;
}

Result<std::pair<std::int64_t, std::int64_t>> unit_range(std::int64_t n, const SharePlace& tp,
                                                         const std::string& what) {
  auto count = unit_counts(n, tp, what);
  if (!count) return count.error();
  const std::int64_t begin =
      std::accumulate(count->begin(), count->begin() + tp.rank, std::int64_t{0});
  return std::make_pair(begin, begin + (*count)[tp.rank]);
}

}  // namespace hetplan::runtime::detail
