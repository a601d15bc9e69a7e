#include "onnx_flags.h"

#include <fmt/format.h>

#include "hetplan/model/onnx_import.h"

namespace hetplan::cli {
namespace {

bool names_onnx(const std::string& s) { return model::parse_onnx_spec(s).has_value(); }

}  // namespace

std::string fold_onnx_flags(std::vector<std::string>& args) {
  std::vector<std::string> keep, options;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--allow-unknown-ops") {
      options.push_back("allow-unknown-ops=true");
    } else if (a == "--batch-dim" || a.rfind("--batch-dim=", 0) == 0) {
      std::string value;
      if (a == "--batch-dim") {
        if (i + 1 >= args.size()) return "--batch-dim: expected a dimension index";
        value = args[++i];
      } else {
        value = a.substr(12);
      }
      options.push_back("batch-dim=" + value);
    } else {
      keep.push_back(a);
    }
  }
  if (options.empty()) return "";
  // The model: --model's value, or the first argument naming an .onnx file (models FILE.onnx).
  std::string* spec = nullptr;
  for (std::size_t i = 0; i < keep.size() && !spec; ++i) {
    std::string& a = keep[i];
    if ((a == "--model" || a == "-m") && i + 1 < keep.size() && names_onnx(keep[i + 1]))
      spec = &keep[i + 1];
    else if (a.rfind("--model=", 0) != 0 && a.rfind("-", 0) != 0 && names_onnx(a))
      spec = &a;
    else if (a.rfind("--model=", 0) == 0 && names_onnx(a))
      spec = &a;
  }
  if (!spec)
    return fmt::format("{}: expected an ONNX model to apply it to (--model FILE.onnx)",
                       options.front().substr(0, options.front().find('=')) == "batch-dim"
                           ? "--batch-dim"
                           : "--allow-unknown-ops");
  for (const std::string& o : options)
    *spec += (spec->find(':', spec->find(".onnx")) == std::string::npos ? ":" : ",") + o;
  args = std::move(keep);
  return "";
}

}  // namespace hetplan::cli
