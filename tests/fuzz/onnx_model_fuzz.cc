// libFuzzer harness: the bytes of an ONNX model file, read by the ONNX importer (protobuf
// parsing, the checker, shape inference with folding, the op mapping), with unknown ops allowed
// so that the mapping runs on whatever graph the mutations make.
#include "fuzz_fixtures.h"
#include "hetplan/model/onnx_import.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace hetplan;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  model::OnnxOptions options;
  options.allow_unknown_ops = true;
  (void)model::read_onnx_bytes(bytes, "fuzz.onnx", options);
  return 0;
}
