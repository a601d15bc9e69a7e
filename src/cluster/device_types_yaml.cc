// The `device_types` list of a cluster file: devices not in the catalog (or corrected figures).
//
//   device_types:
//     - {name: MyGPU, peak_fp16: 100TFLOPS, peak_fp32: 20TFLOPS, memory: 24GB,
//        memory_bandwidth: 900GB/s, price_per_hour: 1.20, architecture: Ampere}
//   prices: {A100-SXM4-80GB: 1.99, v100: 0.79}   # USD per GPU-hour, overriding the catalog
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "cluster_build.h"
#include "hetplan/core/error.h"
#include "yaml_fields.h"

namespace hetplan::cluster::detail {
namespace {

bool same_name(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

DeviceType read_one(const YAML::Node& n, const std::string& path) {
  check_map(n, path,
            {"name", "aliases", "vendor", "peak_fp16", "peak_fp32", "peak_fp8", "peak_tf32",
             "memory", "memory_bandwidth", "source", "price_per_hour", "architecture"});
  DeviceType t;
  t.name = read_string(n, "name", path);
  if (has(n, "aliases")) {
    const std::string apath = child_path(path, "aliases");
    check_list(n["aliases"], apath, "names");
    for (std::size_t i = 0; i < n["aliases"].size(); ++i) {
      const YAML::Node a = n["aliases"][i];
      if (!a.IsScalar() || a.Scalar().empty()) throw InputError(item_path(apath, i), "expected a name");
      t.aliases.push_back(a.Scalar());
    }
  }
  t.vendor = read_string_or(n, "vendor", path, "custom");
  t.peak_fp16 = has(n, "peak_fp16") ? read_flops(n, "peak_fp16", path, true) : FlopsPerSecond(0);
  t.peak_fp32 = read_flops(n, "peak_fp32", path, false);
  t.peak_fp8 = has(n, "peak_fp8") ? read_flops(n, "peak_fp8", path, true) : FlopsPerSecond(0);
  t.peak_tf32 = has(n, "peak_tf32") ? read_flops(n, "peak_tf32", path, true) : FlopsPerSecond(0);
  t.memory = read_bytes(n, "memory", path);
  t.memory_bandwidth = read_bandwidth(n, "memory_bandwidth", path);
  t.source = read_string_or(n, "source", path, "cluster file");
  if (has(n, "architecture")) {
    const std::string written = read_string(n, "architecture", path);
    const auto arch = parse_architecture(written);
    if (!arch)
      throw InputError(child_path(path, "architecture"),
                       fmt::format("unknown architecture '{}' (expected one of {})", written,
                                   architecture_names()));
    t.architecture = *arch;
  }
  if (has(n, "price_per_hour")) {
    t.price_per_hour = read_price(n, "price_per_hour", path);
    t.price_source = "cluster file";
  }
  return t;
}

// `prices`: a mapping from type names (catalog, alias or device_types) to USD per GPU-hour.
void read_prices(const YAML::Node& doc, TypeTable& table) {
  if (!has(doc, "prices")) return;
  const YAML::Node map = doc["prices"];
  if (!map.IsMap())
    throw InputError("prices",
                     "expected a mapping from device type to USD per GPU-hour, e.g. "
                     "{A100-SXM4-80GB: 1.99}");
  for (const auto& kv : map) {
    const std::string name = kv.first.IsScalar() ? kv.first.Scalar() : std::string();
    const std::string field = child_path("prices", name);
    const DeviceType t = table.resolve(name, field);
    for (const auto& [seen, price] : table.prices)
      if (seen == t.name)
        throw InputError(field,
                         fmt::format("a second price for {} (expected one per type)", t.name));
    table.prices.emplace_back(t.name, read_price(map, name, "prices"));
  }
}

}  // namespace

TypeTable read_device_types(const YAML::Node& doc) {
  TypeTable table;
  if (!has(doc, "device_types")) {
    read_prices(doc, table);
    return table;
  }
  const YAML::Node list = doc["device_types"];
  check_list(list, "device_types", "device types");
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string path = item_path("device_types", i);
    DeviceType t = read_one(list[i], path);
    for (const DeviceType& u : table.custom)
      if (same_name(u.name, t.name))
        throw InputError(child_path(path, "name"), fmt::format("duplicate device type '{}'", t.name));
    table.custom.push_back(std::move(t));
  }
  read_prices(doc, table);
  return table;
}

DeviceType TypeTable::resolve(const std::string& name, const std::string& field) const {
  auto priced = [&](DeviceType t) {
    for (const auto& [type, price] : prices)
      if (type == t.name) {
        t.price_per_hour = price;
        t.price_source = "cluster file";
      }
    return t;
  };
  for (const DeviceType& t : custom) {
    if (same_name(t.name, name)) return priced(t);
    for (const std::string& a : t.aliases)
      if (same_name(a, name)) return priced(t);
  }
  if (auto t = find_device_type(name)) return priced(*t);
  throw InputError(field, fmt::format("unknown device type '{}' (expected a catalog name such as "
                                      "V100-SXM2-32GB, or one under device_types)",
                                      name));
}

int intern_type(Cluster& c, const DeviceType& t, const std::string& written) {
  if (!same_name(written, t.name)) {
    const TypeAlias alias{written, t.name};
    if (std::find(c.type_aliases.begin(), c.type_aliases.end(), alias) == c.type_aliases.end())
      c.type_aliases.push_back(alias);
  }
  for (std::size_t i = 0; i < c.device_types.size(); ++i)
    if (c.device_types[i].name == t.name) return static_cast<int>(i);
  c.device_types.push_back(t);
  return static_cast<int>(c.device_types.size()) - 1;
}

}  // namespace hetplan::cluster::detail
