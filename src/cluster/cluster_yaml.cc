// Reading a cluster file: YAML syntax, version, device types, then the node-group or the explicit
// form. Every error becomes one message "<file>: <field>: <what was expected>".
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>

#include "cluster_build.h"
#include "hetplan/cluster/cluster_file.h"
#include "hetplan/core/json_util.h"
#include "yaml_fields.h"

namespace hetplan::cluster {
namespace {

using namespace detail;

YAML::Node load_yaml(std::string_view text) {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    if (e.mark.is_null()) throw InputError(fmt::format("invalid YAML: {}", e.msg));
    throw InputError(fmt::format("line {}, column {}: invalid YAML: {}", e.mark.line + 1,
                                 e.mark.column + 1, e.msg));
  }
}

void check_version(const YAML::Node& doc) {
  if (!has(doc, "version")) throw InputError("version", "missing (expected version: 1)");
  const YAML::Node v = doc["version"];
  if (!v.IsScalar() || v.Scalar() != "1")
    throw InputError("version", fmt::format("unsupported version '{}' (expected 1)",
                                            v.IsScalar() ? v.Scalar() : std::string("?")));
}

Cluster parse(std::string_view text, const std::string& source) {
  const YAML::Node doc = load_yaml(text);
  check_unique_keys(doc, "");
  if (!doc.IsMap())
    throw InputError("document", "expected a mapping with 'version: 1' and 'nodes' (or 'devices')");
  check_map(doc, "",
            {"version", "name", "nodes", "network", "device_types", "prices", "devices", "switches",
             "links"});
  check_version(doc);
  const TypeTable types = read_device_types(doc);
  const bool groups = has(doc, "nodes"), explicit_form = has(doc, "devices");
  if (groups && explicit_form)
    throw InputError(
        "document", "expected either 'nodes' (node groups) or 'devices' (explicit form), not both");
  if (!groups && !explicit_form)
    throw InputError(
        "nodes", "missing (expected a list of node groups, or 'devices' for the explicit form)");
  Cluster c = groups ? build_node_groups(doc, types) : build_explicit(doc, types);
  c.name = read_string_or(doc, "name", "", std::filesystem::path(source).stem().string());
  return c;
}

}  // namespace

Result<Cluster> parse_cluster_yaml(std::string_view yaml_text, const std::string& source) {
  // yaml-cpp can throw on malformed input anywhere (conversions, bad iteration): capture_errors
  // turns every std::exception into a Result, so nothing escapes.
  return capture_errors(source, [&] { return parse(yaml_text, source); });
}

Result<Cluster> read_cluster_file(const std::string& file) {
  std::string text;
  try {
    text = read_text_file(file);
  } catch (const std::exception& e) {
    return Error{e.what()};
  }
  Result<Cluster> c = parse_cluster_yaml(text, file);
  if (c.ok()) {
    std::error_code ec;
    const auto absolute = std::filesystem::absolute(file, ec);
    c->reference = ec ? file : absolute.lexically_normal().string();
  }
  return c;
}

}  // namespace hetplan::cluster
