// Internal to the pipeline planner: questions over the placements of a model's L layers, in order,
// on S stages, that its layer DP considers. Stage s takes layers [a, b), b > a, and only as many as
// fit its devices' memory: b <= reach[s][a], where reach[s] never decreases with a. Both answer
// exactly as if they went over every placement, but stop early where a stage's cost only grows
// with its layers.
#pragma once

#include <algorithm>
#include <limits>
#include <vector>

namespace hetplan::search {

// reach[s][a]: the largest end of a stage s that starts at layer a (a when not even one fits).
using StageReach = std::vector<const std::vector<int>*>;

// Storage for least_slowest, which a caller asking many times keeps to spare the allocations.
struct SlowestScratch {
  std::vector<double> t, next, low;
};

// The least, over the placements, of the largest stage time(s, a, b) (a bottleneck path);
// infinite when no placement fits. time(s, a, b) must not fall as [a, b) grows.
//
// Per state (s, i), the stage's first layer a runs down from i - 1: the stage's time only grows
// and its reach only shrinks. Once the stage [a, i) alone, or the best path to any first layer up
// to a, takes as long as the best path found, no earlier a can do better: the loop stops there.
template <class Time>
double least_slowest(int L, int S, const StageReach& reach, Time&& time, SlowestScratch& scratch) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  auto& [t, next, low] = scratch;
  t.assign(L + 1, kInf);
  next.resize(L + 1);
  low.resize(L + 1);
  for (int i = 1; i <= L && i <= (*reach[0])[0]; ++i) t[i] = time(0, 0, i);
  for (int s = 1; s < S; ++s) {
    const int last_i = s + 1 == S ? L : L - (S - 1 - s);
    low[0] = t[0];  // the best path to any first layer up to a
    for (int a = 1; a <= L; ++a) low[a] = std::min(low[a - 1], t[a]);
    std::fill(next.begin(), next.end(), kInf);
    for (int i = s + 1; i <= last_i; ++i) {
      double best = kInf;
      for (int a = i - 1; a >= s && (*reach[s])[a] >= i; --a) {
        const double c = time(s, a, i);
        if (std::max(low[a], c) >= best) break;
        best = std::min(best, std::max(t[a], c));
      }
      next[i] = best;
    }
    t.swap(next);
  }
  return t[L];
}

template <class Time>
double least_slowest(int L, int S, const StageReach& reach, Time&& time) {
  SlowestScratch scratch;
  return least_slowest(L, S, reach, time, scratch);
}

// Whether some placement has every stage pass ok(s, a, b). A stage that fails must fail with
// more layers too, but for one exception: a stage that takes in layer table_layer (the tied
// embedding table; -1 for none) sheds the table's copy, so may pass where a smaller one failed.
template <class Ok>
bool any_placement(int L, int S, const StageReach& reach, int table_layer, Ok&& ok) {
  std::vector<char> can(L + 1, 0), next(L + 1);
  for (int i = 1; i <= L && i <= (*reach[0])[0]; ++i) can[i] = ok(0, 0, i);
  for (int s = 1; s < S; ++s) {
    const int last_i = s + 1 == S ? L : L - (S - 1 - s);
    std::fill(next.begin(), next.end(), 0);
    for (int i = s + 1; i <= last_i; ++i)
      for (int a = i - 1; a >= s && (*reach[s])[a] >= i; --a) {
        if (!can[a]) continue;
        if (ok(s, a, i)) {
          next[i] = 1;
          break;
        }
        // Further down, [a, i) only grows, unless it may yet take in the tied table.
        if (!(table_layer >= s && table_layer < a)) break;
      }
    can.swap(next);
  }
  return can[L] != 0;
}

}  // namespace hetplan::search
