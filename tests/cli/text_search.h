// Counting and finding fragments in the text a test produced (HTML, SVG, a report).
#pragma once

#include <cstddef>
#include <string>

namespace hetplan::cli::testing {

inline std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

inline bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

}  // namespace hetplan::cli::testing
