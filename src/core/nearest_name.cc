// Edit distance for suggestions (nearest_name.h).
#include "hetplan/core/nearest_name.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace hetplan {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  auto same = [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) ==
           std::tolower(static_cast<unsigned char>(y));
  };
  // One row of the dynamic program at a time: row[j] is the distance between a's prefix so far
  // and b's first j characters.
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({above + 1, row[j - 1] + 1, diagonal + (same(a[i - 1], b[j - 1]) ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

bool likely_typo(std::string_view given, std::string_view known) {
  const std::size_t d = edit_distance(given, known);
  const std::size_t longer = std::max(given.size(), known.size());
  return d > 0 && d <= std::max<std::size_t>(1, longer / 3);
}

}  // namespace hetplan
