#include "yaml_fields.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <set>

#include "hetplan/core/error.h"
#include "hetplan/core/nearest_name.h"
#include "hetplan/core/quantity_parse.h"

namespace hetplan::cluster::detail {
namespace {

const char* kBandwidth = "a positive bandwidth such as 200Gbps or 300GB/s";
const char* kDuration = "a non-negative duration such as 5us";
const char* kBytes = "a positive size such as 80GB or 80GiB";

// The scalar text of map[key]; throws when missing or not a scalar.
std::string scalar(const YAML::Node& map, std::string_view key, std::string_view path,
                   std::string_view expected) {
  const std::string field = child_path(path, key);
  if (!has(map, key)) throw InputError(field, fmt::format("missing (expected {})", expected));
  const YAML::Node v = map[std::string(key)];
  if (!v.IsScalar()) throw InputError(field, fmt::format("expected {}", expected));
  return v.Scalar();
}

std::string show(const std::string& text) { return fmt::format("'{}'", text); }

}  // namespace

std::string child_path(std::string_view path, std::string_view key) {
  return path.empty() ? std::string(key) : fmt::format("{}.{}", path, key);
}

std::string item_path(std::string_view path, std::size_t i) {
  return fmt::format("{}[{}]", path, i);
}

bool has(const YAML::Node& map, std::string_view key) {
  if (!map.IsMap()) return false;
  const YAML::Node v = map[std::string(key)];
  return v.IsDefined() && !v.IsNull();
}

namespace {

// Nesting deeper than any cluster file needs is refused rather than recursed into.
constexpr int kMostNesting = 64;

// Checks one mapping or list and what it holds, each once: an alias (*a) names a node already
// read (the same place in the text), so a node that holds itself, or a chain of aliases that
// would expand a billionfold, is walked once.
void check_unique_keys(const YAML::Node& node, const std::string& path, int depth,
                       std::set<int>& seen_at) {
  if (!node.IsMap() && !node.IsSequence()) return;
  if (const YAML::Mark at = node.Mark(); !at.is_null() && !seen_at.insert(at.pos).second) return;
  if (depth > kMostNesting)
    throw InputError(path.empty() ? std::string("document") : path,
                     fmt::format("nested more than {} levels deep", kMostNesting));
  if (node.IsMap()) {
    std::set<std::string> keys;
    for (const auto& kv : node) {
      const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : std::string("?");
      const std::string field = child_path(path, key);
      if (!keys.insert(key).second)
        throw InputError(field, "duplicate key (each key may appear once in a mapping)");
      check_unique_keys(kv.second, field, depth + 1, seen_at);
    }
  } else {
    for (std::size_t i = 0; i < node.size(); ++i)
      check_unique_keys(node[i], item_path(path, i), depth + 1, seen_at);
  }
}

}  // namespace

void check_unique_keys(const YAML::Node& node, std::string_view path) {
  std::set<int> seen_at;
  check_unique_keys(node, std::string(path), 0, seen_at);
}

void check_map(const YAML::Node& node, std::string_view path,
               std::initializer_list<std::string_view> allowed) {
  const std::string where = path.empty() ? std::string("document") : std::string(path);
  std::string list;
  for (std::string_view k : allowed) list += (list.empty() ? "" : ", ") + std::string(k);
  if (!node.IsMap()) throw InputError(where, fmt::format("expected a mapping with keys {}", list));
  for (const auto& kv : node) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : std::string("?");
    bool ok = false;
    for (std::string_view k : allowed) ok = ok || key == k;
    if (!ok)
      throw InputError(where, fmt::format("unknown key '{}'{} (allowed: {})", key,
                                          did_you_mean(key, allowed), list));
  }
}

void check_list(const YAML::Node& node, std::string_view path, std::string_view of_what) {
  if (!node.IsSequence())
    throw InputError(std::string(path), fmt::format("expected a list of {}", of_what));
}

std::string read_string(const YAML::Node& map, std::string_view key, std::string_view path) {
  std::string s = scalar(map, key, path, "a non-empty string");
  if (s.empty()) throw InputError(child_path(path, key), "expected a non-empty string");
  return s;
}

std::string read_string_or(const YAML::Node& map, std::string_view key, std::string_view path,
                           std::string_view dflt) {
  return has(map, key) ? read_string(map, key, path) : std::string(dflt);
}

long long read_positive_int(const YAML::Node& map, std::string_view key, std::string_view path) {
  const std::string s = scalar(map, key, path, "a positive integer");
  long long v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v <= 0)
    throw InputError(child_path(path, key),
                     fmt::format("expected a positive integer, got {}", show(s)));
  return v;
}

long long read_positive_int_or(const YAML::Node& map, std::string_view key, std::string_view path,
                               long long dflt) {
  return has(map, key) ? read_positive_int(map, key, path) : dflt;
}

double read_number_or(const YAML::Node& map, std::string_view key, std::string_view path,
                      double dflt) {
  if (!has(map, key)) return dflt;
  const std::string s = scalar(map, key, path, "a number");
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v))
    throw InputError(child_path(path, key), fmt::format("expected a number, got {}", show(s)));
  return v;
}

bool read_bool_or(const YAML::Node& map, std::string_view key, std::string_view path, bool dflt) {
  if (!has(map, key)) return dflt;
  const std::string s = scalar(map, key, path, "true or false");
  if (s == "true" || s == "yes") return true;
  if (s == "false" || s == "no") return false;
  throw InputError(child_path(path, key), fmt::format("expected true or false, got {}", show(s)));
}

UsdPerHour read_price(const YAML::Node& map, std::string_view key, std::string_view path) {
  const double v = read_number_or(map, key, path, -1);
  if (!(v >= 0 && v <= 1000))
    throw InputError(child_path(path, key),
                     "expected US dollars per GPU-hour, a number in [0, 1000] (e.g. 1.99)");
  return UsdPerHour(v);
}

double read_background_load(const YAML::Node& map, std::string_view path) {
  const double load = read_number_or(map, "background_load", path, 0.0);
  if (!(load >= 0 && load <= kMaxBackgroundLoad))
    throw InputError(child_path(path, "background_load"),
                     fmt::format("expected a number in [0, {:g}] (the fraction of the bandwidth "
                                 "that cross traffic takes)",
                                 kMaxBackgroundLoad));
  return load;
}

BytesPerSecond read_bandwidth(const YAML::Node& map, std::string_view key, std::string_view path) {
  const std::string s = scalar(map, key, path, kBandwidth);
  auto v = parse_bandwidth(s);
  if (!v || !(v->value > 0) || !std::isfinite(v->value))
    throw InputError(child_path(path, key),
                     fmt::format("expected {}, got {}", kBandwidth, show(s)));
  return *v;
}

Seconds read_duration_or(const YAML::Node& map, std::string_view key, std::string_view path,
                         Seconds dflt) {
  if (!has(map, key)) return dflt;
  const std::string s = scalar(map, key, path, kDuration);
  auto v = parse_duration(s);
  if (!v || !std::isfinite(v->value))
    throw InputError(child_path(path, key), fmt::format("expected {}, got {}", kDuration, show(s)));
  return *v;
}

Bytes read_bytes(const YAML::Node& map, std::string_view key, std::string_view path) {
  const std::string s = scalar(map, key, path, kBytes);
  auto v = parse_bytes(s);
  if (!v || !(v->value > 0) || !std::isfinite(v->value))
    throw InputError(child_path(path, key), fmt::format("expected {}, got {}", kBytes, show(s)));
  return *v;
}

FlopsPerSecond read_flops(const YAML::Node& map, std::string_view key, std::string_view path,
                          bool allow_zero) {
  const char* expected =
      allow_zero ? "a non-negative rate such as 312TFLOPS" : "a positive rate such as 19.5TFLOPS";
  const std::string s = scalar(map, key, path, expected);
  auto v = parse_flops_rate(s);
  if (!v || !std::isfinite(v->value) || (!allow_zero && !(v->value > 0)))
    throw InputError(child_path(path, key), fmt::format("expected {}, got {}", expected, show(s)));
  return *v;
}

}  // namespace hetplan::cluster::detail
