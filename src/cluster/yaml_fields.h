// Private to the cluster layer: reading typed fields out of yaml-cpp nodes with errors that name
// the field path ("nodes[0].nic.bandwidth") and what was expected. All functions throw InputError;
// parse_cluster_yaml turns that into a Result prefixed by the file name.
#pragma once

#include <yaml-cpp/yaml.h>

#include <initializer_list>
#include <string>
#include <string_view>

#include "hetplan/core/units.h"

namespace hetplan::cluster::detail {

std::string child_path(std::string_view path, std::string_view key);  // "a.b" or "b"
std::string item_path(std::string_view path, std::size_t i);          // "a[3]"

// True when map has `key` with a non-null value.
bool has(const YAML::Node& map, std::string_view key);
// Throws unless `node` is a mapping whose keys are all in `allowed` (listed in the message).
// Refuses a key given twice in one mapping anywhere in the document (yaml-cpp keeps both, and
// lookups see the first, so the second would skip every check).
void check_unique_keys(const YAML::Node& node, std::string_view path);

void check_map(const YAML::Node& node, std::string_view path,
               std::initializer_list<std::string_view> allowed);
// Throws unless `node` is a sequence ("expected a list of ...").
void check_list(const YAML::Node& node, std::string_view path, std::string_view of_what);

// Required fields (missing: "<path>: missing (expected ...)").
std::string read_string(const YAML::Node& map, std::string_view key, std::string_view path);
long long read_positive_int(const YAML::Node& map, std::string_view key, std::string_view path);
BytesPerSecond read_bandwidth(const YAML::Node& map, std::string_view key, std::string_view path);
Bytes read_bytes(const YAML::Node& map, std::string_view key, std::string_view path);
FlopsPerSecond read_flops(const YAML::Node& map, std::string_view key, std::string_view path,
                          bool allow_zero);

// Optional fields, returning `dflt` when absent.
std::string read_string_or(const YAML::Node& map, std::string_view key, std::string_view path,
                           std::string_view dflt);
long long read_positive_int_or(const YAML::Node& map, std::string_view key, std::string_view path,
                               long long dflt);
Seconds read_duration_or(const YAML::Node& map, std::string_view key, std::string_view path,
                         Seconds dflt);
double read_number_or(const YAML::Node& map, std::string_view key, std::string_view path,
                      double dflt);
bool read_bool_or(const YAML::Node& map, std::string_view key, std::string_view path, bool dflt);

// map[key]: a price in US dollars per GPU-hour, a number in [0, 1000] ("1.99"; 0 for free).
UsdPerHour read_price(const YAML::Node& map, std::string_view key, std::string_view path);

// map["background_load"]: the fraction of a link's bandwidth taken by cross traffic, in
// [0, kMaxBackgroundLoad]; 0 when absent.
double read_background_load(const YAML::Node& map, std::string_view path);
// At most 95% of a link's bandwidth may go to other traffic: what is left stays positive, so
// transfer times stay finite.
inline constexpr double kMaxBackgroundLoad = 0.95;

}  // namespace hetplan::cluster::detail
