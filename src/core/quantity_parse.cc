#include "hetplan/core/quantity_parse.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <string>

namespace hetplan {
namespace {

struct NumberAndUnit {
  double number = 0;
  std::string unit;
};

// Splits "300 GB/s" into 300 and "GB/s". Rejects negative, non-finite or missing numbers.
std::optional<NumberAndUnit> split(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())))
    text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
  std::size_t i = 0;
  while (i < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.' || text[i] == 'e' ||
          text[i] == 'E' || text[i] == '+' ||
          (text[i] == '-' && i > 0 && (text[i - 1] == 'e' || text[i - 1] == 'E')))) {
    // Stop at an 'e'/'E' that starts a unit such as "EB": only treat it as an exponent when a digit
    // or sign follows.
    if ((text[i] == 'e' || text[i] == 'E') &&
        !(i + 1 < text.size() && (std::isdigit(static_cast<unsigned char>(text[i + 1])) ||
                                  text[i + 1] == '-' || text[i + 1] == '+')))
      break;
    ++i;
  }
  if (i == 0) return std::nullopt;
  NumberAndUnit out;
  std::string num(text.substr(0, i));
  char* end = nullptr;
  out.number = std::strtod(num.c_str(), &end);
  if (end != num.c_str() + num.size() || !std::isfinite(out.number) || out.number < 0)
    return std::nullopt;
  std::string_view rest = text.substr(i);
  while (!rest.empty() && std::isspace(static_cast<unsigned char>(rest.front())))
    rest.remove_prefix(1);
  out.unit = std::string(rest);
  return out;
}

// Multiplier of a prefix: "", k/K, M, G, T, P (decimal) and Ki, Mi, Gi, Ti (binary).
std::optional<double> prefix_multiplier(std::string_view p) {
  if (p.empty()) return 1.0;
  if (p == "k" || p == "K") return 1e3;
  if (p == "M") return 1e6;
  if (p == "G") return 1e9;
  if (p == "T") return 1e12;
  if (p == "P") return 1e15;
  if (p == "Ki") return 1024.0;
  if (p == "Mi") return 1024.0 * 1024.0;
  if (p == "Gi") return 1024.0 * 1024.0 * 1024.0;
  if (p == "Ti") return 1024.0 * 1024.0 * 1024.0 * 1024.0;
  return std::nullopt;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

std::optional<Bytes> parse_bytes(std::string_view text) {
  auto nu = split(text);
  if (!nu) return std::nullopt;
  std::string_view u = nu->unit;
  if (u.empty()) return Bytes(nu->number);
  if (!ends_with(u, "B")) return std::nullopt;
  auto m = prefix_multiplier(u.substr(0, u.size() - 1));
  if (!m) return std::nullopt;
  return Bytes(nu->number * *m);
}

std::optional<BytesPerSecond> parse_bandwidth(std::string_view text) {
  auto nu = split(text);
  if (!nu) return std::nullopt;
  std::string_view u = nu->unit;
  double scale = 0;
  std::string_view prefix;
  if (ends_with(u, "B/s")) {
    scale = 1.0;
    prefix = u.substr(0, u.size() - 3);
  } else if (ends_with(u, "Bps")) {
    scale = 1.0;
    prefix = u.substr(0, u.size() - 3);
  } else if (ends_with(u, "bps")) {
    scale = 1.0 / 8.0;
    prefix = u.substr(0, u.size() - 3);
  } else if (ends_with(u, "b/s")) {
    scale = 1.0 / 8.0;
    prefix = u.substr(0, u.size() - 3);
  } else {
    return std::nullopt;
  }
  auto m = prefix_multiplier(prefix);
  if (!m) return std::nullopt;
  return BytesPerSecond(nu->number * *m * scale);
}

std::optional<Seconds> parse_duration(std::string_view text) {
  auto nu = split(text);
  if (!nu) return std::nullopt;
  const std::string& u = nu->unit;
  double m = 0;
  if (u == "s" || u.empty())
    m = 1;
  else if (u == "ms")
    m = 1e-3;
  else if (u == "us" || u == "\xC2\xB5s")
    m = 1e-6;
  else if (u == "ns")
    m = 1e-9;
  else
    return std::nullopt;
  return Seconds(nu->number * m);
}

std::optional<FlopsPerSecond> parse_flops_rate(std::string_view text) {
  auto nu = split(text);
  if (!nu) return std::nullopt;
  std::string_view u = nu->unit;
  if (ends_with(u, "FLOPS"))
    u.remove_suffix(5);
  else if (ends_with(u, "FLOP/s"))
    u.remove_suffix(6);
  auto m = prefix_multiplier(u);
  if (!m || (u.size() == 2)) return std::nullopt;  // no binary prefixes for FLOP/s
  return FlopsPerSecond(nu->number * *m);
}

std::string format_bytes(Bytes b) {
  const double v = b.value;
  if (v >= 1024.0 * 1024 * 1024 * 1024)
    return fmt::format("{:.2f} TiB", v / (1024.0 * 1024 * 1024 * 1024));
  if (v >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", v / (1024.0 * 1024 * 1024));
  if (v >= 1024.0 * 1024) return fmt::format("{:.2f} MiB", v / (1024.0 * 1024));
  if (v >= 1024.0) return fmt::format("{:.2f} KiB", v / 1024.0);
  return fmt::format("{:.0f} B", v);
}

std::string format_bandwidth(BytesPerSecond r) {
  const double v = r.value;
  if (v >= 1e12) return fmt::format("{:.3g} TB/s", v / 1e12);
  if (v >= 1e9) return fmt::format("{:.3g} GB/s", v / 1e9);
  if (v >= 1e6) return fmt::format("{:.3g} MB/s", v / 1e6);
  return fmt::format("{:.3g} B/s", v);
}

std::string format_duration(Seconds s) {
  const double v = s.value;
  if (v >= 1.0) return fmt::format("{:.3f} s", v);
  if (v >= 1e-3) return fmt::format("{:.3f} ms", v * 1e3);
  if (v >= 1e-6) return fmt::format("{:.3f} us", v * 1e6);
  return fmt::format("{:.1f} ns", v * 1e9);
}

std::string format_flops_rate(FlopsPerSecond r) {
  const double v = r.value;
  if (v >= 1e12) return fmt::format("{:.1f} TFLOP/s", v / 1e12);
  if (v >= 1e9) return fmt::format("{:.1f} GFLOP/s", v / 1e9);
  return fmt::format("{:.3g} FLOP/s", v);
}

}  // namespace hetplan
