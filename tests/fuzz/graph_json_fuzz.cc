// libFuzzer harness: graph JSON text, parsed (duplicate keys refused) and read as a model.
#include "fuzz_fixtures.h"
#include "hetplan/model/graph_json.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace hetplan;
  const auto doc = fuzz::json_of(data, size);
  if (!doc) return 0;
  const auto m = model::model_from_json(*doc, "fuzz.json");
  if (m) (void)model::to_json(*m).dump();
  return 0;
}
