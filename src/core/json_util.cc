#include "hetplan/core/json_util.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "hetplan/core/error.h"
#include "hetplan/core/nearest_name.h"

namespace hetplan {

std::string field_path(std::string_view path, std::string_view key) {
  if (path.empty()) return std::string(key);
  return fmt::format("{}.{}", path, key);
}

std::string index_path(std::string_view path, std::size_t i) {
  return fmt::format("{}[{}]", path, i);
}

namespace {

// A SAX pass that only checks for keys given twice. (nlohmann's callback parser, which could do it
// while building the document, removes discarded values by a scan of the enclosing array at the
// end of every object: quadratic, 4.7 s for a graph of 100,000 ops.)
class UniqueKeys : public nlohmann::json_sax<Json> {
 public:
  bool null() override { return element_done(); }
  bool boolean(bool) override { return element_done(); }
  bool number_integer(number_integer_t) override { return element_done(); }
  bool number_unsigned(number_unsigned_t) override { return element_done(); }
  bool number_float(number_float_t, const string_t&) override { return element_done(); }
  bool string(string_t&) override { return element_done(); }
  bool binary(binary_t&) override { return element_done(); }
  bool start_object(std::size_t) override { return open(true); }
  bool start_array(std::size_t) override { return open(false); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    Frame& f = frames_.back();
    if (!f.keys.insert(k).second)
      throw InputError(field_path(path(frames_.size() - 1), k),
                       "duplicate key (each key may appear once in an object)");
    f.key = k;
    return true;
  }
  // Syntax errors: Json::parse, run next, reports them.
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  // One frame per object or array being read: its keys so far and the last, or its next index.
  struct Frame {
    bool object = false;
    std::set<std::string> keys;
    std::string key;
    std::size_t index = 0;
  };
  bool open(bool object) {
    // hetplan's documents nest a few levels; thousands only make work for later code.
    if (frames_.size() >= kMaxDepth)
      throw InputError(path(frames_.size()),
                       fmt::format("expected at most {} levels of nesting", kMaxDepth));
    frames_.push_back(Frame{object, {}, {}, 0});
    return true;
  }
  static constexpr std::size_t kMaxDepth = 64;
  bool close() {
    frames_.pop_back();
    return element_done();
  }
  bool element_done() {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().index;
    return true;
  }
  // The path of frame n's value, built only for the error.
  std::string path(std::size_t n) const {
    std::string p;
    for (std::size_t i = 0; i < n; ++i)
      p = frames_[i].object ? field_path(p, frames_[i].key) : index_path(p, frames_[i].index);
    return p;
  }
  std::vector<Frame> frames_;
};

}  // namespace

Json parse_json_unique_keys(std::string_view text) {
  UniqueKeys check;
  Json::sax_parse(text.begin(), text.end(), &check);  // false on a syntax error
  return Json::parse(text.begin(), text.end());
}

void json_refuse_unknown_keys(const Json& obj, std::string_view path,
                              const std::vector<std::string>& keys) {
  for (const auto& [key, value] : obj.items())
    if (std::find(keys.begin(), keys.end(), key) == keys.end())
      throw InputError(field_path(path, key),
                       fmt::format("unknown field{}; expected one of {}", did_you_mean(key, keys),
                                   fmt::join(keys, ", ")));
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
  // Input files (cluster YAML, plan, graph and calibration JSON) are small: refused past a bound
  // rather than read into memory whatever their size.
  constexpr std::uintmax_t kMaxBytes = std::uintmax_t{256} << 20;
  const std::uintmax_t size = std::filesystem::file_size(file, ec);
  if (!ec && size > kMaxBytes)
    throw InputError(
        file, fmt::format("expected a file of at most 256 MiB; this one has {} bytes", size));
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
