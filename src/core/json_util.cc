#include "hetplan/core/json_util.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "hetplan/core/error.h"

namespace hetplan {

std::string field_path(std::string_view path, std::string_view key) {
  if (path.empty()) return std::string(key);
  return fmt::format("{}.{}", path, key);
}

std::string index_path(std::string_view path, std::size_t i) {
  return fmt::format("{}[{}]", path, i);
}

Json parse_json_unique_keys(std::string_view text) {
  // One frame per object or array being read: its path, and its keys so far or its next index.
  struct Frame {
    bool object = false;
    std::string path;
    std::set<std::string> keys;
    std::string key;
    std::size_t index = 0;
  };
  std::vector<Frame> open;
  auto child_path = [&]() -> std::string {
    if (open.empty()) return "";
    const Frame& f = open.back();
    return f.object ? field_path(f.path, f.key) : index_path(f.path, f.index);
  };
  auto element_done = [&] {
    if (!open.empty() && !open.back().object) ++open.back().index;
  };
  auto on_event = [&](int, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        open.push_back(Frame{event == Json::parse_event_t::object_start, child_path(), {}, {}, 0});
        break;
      case Json::parse_event_t::key: {
        Frame& f = open.back();
        std::string key = parsed.get<std::string>();
        if (!f.keys.insert(key).second)
          throw InputError(field_path(f.path, key),
                           "duplicate key (each key may appear once in an object)");
        f.key = std::move(key);
        break;
      }
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        open.pop_back();
        element_done();
        break;
      case Json::parse_event_t::value:
        element_done();
        break;
    }
    return true;
  };
  return Json::parse(text.begin(), text.end(), on_event);
}

const Json& json_require(const Json& obj, std::string_view key, std::string_view path) {
  if (!obj.is_object())
    throw InputError(std::string(path.empty() ? "document" : path), "expected an object");
  auto it = obj.find(key);
  if (it == obj.end()) throw InputError(field_path(path, key), "missing (required)");
  return *it;
}

double json_number(const Json& obj, std::string_view key, std::string_view path) {
  const Json& v = json_require(obj, key, path);
  if (!v.is_number() || !std::isfinite(v.get<double>()))
    throw InputError(field_path(path, key), "expected a number");
  return v.get<double>();
}

double json_number_or(const Json& obj, std::string_view key, std::string_view path, double dflt) {
  if (!obj.is_object() || !obj.contains(key)) return dflt;
  return json_number(obj, key, path);
}

long long json_int(const Json& obj, std::string_view key, std::string_view path) {
  const Json& v = json_require(obj, key, path);
  if (!v.is_number_integer()) throw InputError(field_path(path, key), "expected an integer");
  return v.get<long long>();
}

long long json_int_or(const Json& obj, std::string_view key, std::string_view path,
                      long long dflt) {
  if (!obj.is_object() || !obj.contains(key)) return dflt;
  return json_int(obj, key, path);
}

std::string json_string(const Json& obj, std::string_view key, std::string_view path) {
  const Json& v = json_require(obj, key, path);
  if (!v.is_string()) throw InputError(field_path(path, key), "expected a string");
  return v.get<std::string>();
}

std::string json_string_or(const Json& obj, std::string_view key, std::string_view path,
                           std::string_view dflt) {
  if (!obj.is_object() || !obj.contains(key)) return std::string(dflt);
  return json_string(obj, key, path);
}

bool json_bool_or(const Json& obj, std::string_view key, std::string_view path, bool dflt) {
  if (!obj.is_object() || !obj.contains(key)) return dflt;
  const Json& v = obj.at(std::string(key));
  if (!v.is_boolean()) throw InputError(field_path(path, key), "expected true or false");
  return v.get<bool>();
}

void json_require_version(const Json& doc, int expected, std::string_view path) {
  const Json& v = json_require(doc, "version", path);
  if (!v.is_number_integer() || v.get<long long>() != expected)
    throw InputError(field_path(path, "version"), fmt::format("expected {}", expected));
}

std::string read_text_file(const std::string& file) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec))
    throw InputError(file, "cannot read: no such file");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(file, "cannot open for reading");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_text_file_atomic(const std::string& file, std::string_view text) {
  namespace fs = std::filesystem;
  fs::path target(file);
  fs::path tmp = target;
  tmp += ".tmp-hetplan";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw InputError(file, "cannot open for writing");
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.flush();
    if (!out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw InputError(file, "write failed");
    }
  }
  std::error_code ec;
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw InputError(file, "cannot write: " + ec.message());
  }
}

}  // namespace hetplan
