// What the libFuzzer harnesses share: the input as text, and a small model and cluster to lay
// plans out on (built once per process).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include "hetplan/cluster/cluster_file.h"
#include "hetplan/core/error.h"
#include "hetplan/core/json_util.h"
#include "hetplan/model/zoo.h"

namespace hetplan::fuzz {

inline std::string text_of(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// The input as a JSON document, or nothing where the readers refuse it before reading it (not JSON,
// a key given twice, nesting too deep).
inline std::optional<Json> json_of(const std::uint8_t* data, std::size_t size) {
  try {
    return parse_json_unique_keys(text_of(data, size));
  } catch (const Json::exception&) {
    return std::nullopt;
  } catch (const InputError&) {
    return std::nullopt;
  }
}

// A library that returned an error value is fine; one that failed to build the fixtures is a bug
// in the harness, reported as a crash.
inline const model::Model& small_model() {
  static const model::Model m = [] {
    auto r = model::load_model("gpt:layers=2,hidden=64,heads=4,seq=32,vocab=128");
    if (!r) std::abort();
    return *r;
  }();
  return m;
}

inline const cluster::Cluster& small_cluster() {
  static const cluster::Cluster c = [] {
    auto r = cluster::load_cluster("dgx-a100:1");
    if (!r) std::abort();
    return *r;
  }();
  return c;
}

}  // namespace hetplan::fuzz
