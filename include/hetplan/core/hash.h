// A stable 64-bit fingerprint (FNV-1a) for plans and results: the same bytes give the same value on
// every machine and run. And the combining step of in-memory hash tables' key hashes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace hetplan {

std::uint64_t fnv1a64(std::string_view bytes);
std::string fingerprint_hex(std::string_view bytes);  // 16 lower-case hex digits

// A key hash h combined with one more word v: v is spread over all bits (the splitmix64
// finaliser) before it is combined. Multiplying whole words alone left keys' differences in few
// bits, and long chains. Start from kHashSeed.
inline constexpr std::size_t kHashSeed = 0x9e3779b97f4a7c15ull;
inline std::size_t hash_mix(std::size_t h, std::size_t v) {
  v += kHashSeed + h;
  v = (v ^ (v >> 30)) * 0xbf58476d1ce4e5b9ull;
  v = (v ^ (v >> 27)) * 0x94d049bb133111ebull;
  return v ^ (v >> 31);
}

}  // namespace hetplan
