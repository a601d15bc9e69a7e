// A stable 64-bit fingerprint (FNV-1a) for plans and results: the same bytes give the same value on
// every machine and run.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace hetplan {

std::uint64_t fnv1a64(std::string_view bytes);
std::string fingerprint_hex(std::string_view bytes);  // 16 lower-case hex digits

}  // namespace hetplan
