// --batch-dim N and --allow-unknown-ops, accepted by every command that reads a model: they are
// folded into the ONNX model's spec ("m.onnx" -> "m.onnx:batch-dim=1,allow-unknown-ops=true"),
// so that a plan file's recorded model loads the same way again.
#pragma once

#include <string>
#include <vector>

namespace hetplan::cli {

// Rewrites args (argv without the program name) in place; returns an error message, or "" when
// the flags were absent or applied.
std::string fold_onnx_flags(std::vector<std::string>& args);

}  // namespace hetplan::cli
