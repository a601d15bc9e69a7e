#include "hetplan/core/hash.h"

#include <fmt/format.h>

namespace hetplan {

std::uint64_t fnv1a64(std::string_view bytes) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string fingerprint_hex(std::string_view bytes) {
  return fmt::format("{:016x}", fnv1a64(bytes));
}

}  // namespace hetplan
