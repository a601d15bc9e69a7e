// Parsing of quantities written with units in files and on the command line:
// "300GB/s", "200Gbps", "80GiB", "5us", "312TFLOPS". Decimal prefixes are powers of 1000,
// binary ones (KiB, MiB, GiB, TiB) powers of 1024; "b" (lower case) is bits, "B" bytes.
#pragma once

#include <optional>
#include <string_view>

#include "hetplan/core/units.h"

namespace hetplan {

std::optional<Bytes> parse_bytes(std::string_view text);
std::optional<BytesPerSecond> parse_bandwidth(std::string_view text);  // "300GB/s", "200Gbps"
std::optional<Seconds> parse_duration(std::string_view text);  // "5us", "1.5ms", "2s", "3ns"
std::optional<FlopsPerSecond> parse_flops_rate(std::string_view text);  // "312TFLOPS", "19.5T"

// Human-readable forms for summaries: "80.0 GiB", "300 GB/s", "2.00 us".
std::string format_bytes(Bytes b);
std::string format_bandwidth(BytesPerSecond r);
std::string format_duration(Seconds s);
std::string format_flops_rate(FlopsPerSecond r);

}  // namespace hetplan
