// libFuzzer harness: a --model argument (a preset, a preset with overrides, or a family spec);
// names of graph files (".json", ".onnx") are left out, which would read files.
#include "fuzz_fixtures.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace hetplan;
  const std::string text = fuzz::text_of(data, size);
  if (text.find(".json") != std::string::npos || text.find(".onnx") != std::string::npos) return 0;
  (void)model::load_model(text);
  return 0;
}
