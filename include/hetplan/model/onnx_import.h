// Reads an ONNX model file (protobuf, through Debian's libonnx) into hetplan's graph: ONNX ops
// mapped to op kinds with per-sample FLOPs, bytes, parameters and saved activations, shapes from
// ONNX shape inference, layers from the exporter's scope names.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hetplan/core/error.h"
#include "hetplan/model/model.h"

namespace hetplan::model {

struct OnnxOptions {
  // The batch dimension of the graph's inputs. A symbolic one is bound to 1; a fixed one of size
  // B divides every activation cost by B (costs are per sample).
  int batch_dim = 0;
  // Ops hetplan does not know are costed as memory-bound elementwise ops (with a warning)
  // instead of refused.
  bool allow_unknown_ops = false;
  // Activations and weights costed at this type instead of the file's own (bf16 for mixed
  // precision training of an fp32 export); unset: the file's float type.
  std::optional<DType> dtype;
  // Sizes of the other symbolic dimensions by name ("sequence" -> 2048); one not given is taken
  // as 512, with a warning.
  std::map<std::string, std::int64_t> dims;
};

struct OnnxModel {
  Model model;
  // One line each: ops costed as unknown, symbolic dimensions taken as 512.
  std::vector<std::string> warnings;
  // Elements of the float initializers that are not trained (batch-norm running statistics).
  std::int64_t non_trainable_elements = 0;
};

// The file's trainable initializers (every floating-point initializer except batch-norm running
// means and variances) make Model::parameters() exactly. Errors name the file and, where there is
// one, the node or tensor: an unreadable or truncated file, ops hetplan does not know (each op
// type with its count), shapes inference could not find.
Result<OnnxModel> read_onnx_file(const std::string& file, const OnnxOptions& options);
// The same from the file's bytes, read already (`name` names them in errors); weights kept as
// external data are not looked for.
Result<OnnxModel> read_onnx_bytes(const std::string& bytes, const std::string& name,
                                  const OnnxOptions& options);

// "FILE.onnx" or "FILE.onnx:key=value,...": keys batch-dim, allow-unknown-ops (true/false),
// dtype, and otherwise a symbolic dimension's name with its size. nullopt: not an ONNX spec.
std::optional<Result<std::pair<std::string, OnnxOptions>>> parse_onnx_spec(std::string_view text);

}  // namespace hetplan::model
