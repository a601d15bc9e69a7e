// Suggestions for mistyped names: the known name nearest to an unknown one, by edit distance.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace hetplan {

// Levenshtein distance: single-character insertions, deletions and substitutions, ASCII case
// ignored.
std::size_t edit_distance(std::string_view a, std::string_view b);

// Whether `known` is near enough to `given` to be what was meant: within a third of the longer
// name's length (at least 1, so "nic" suggests "nics"), and not the same name.
bool likely_typo(std::string_view given, std::string_view known);

// " (did you mean 'bandwidth'?)" for the name of `names` (strings or string views) nearest to
// `given` when it is a likely typo and no other name is as near; "" otherwise ("p" among dp, tp
// and pp suggests none).
template <class Names>
std::string did_you_mean(std::string_view given, const Names& names) {
  std::string_view best;
  std::size_t best_distance = 0;
  bool tied = false;
  for (const auto& n : names) {
    const std::string_view name(n);
    if (!likely_typo(given, name)) continue;
    const std::size_t d = edit_distance(given, name);
    if (best.empty() || d < best_distance) {
      best = name;
      best_distance = d;
      tied = false;
    } else if (d == best_distance) {
      tied = true;
    }
  }
  return best.empty() || tied ? std::string() : " (did you mean '" + std::string(best) + "'?)";
}

}  // namespace hetplan
