// libFuzzer harness: graph JSON text, parsed (duplicate keys refused) and read as a model.
#include <nlohmann/json.hpp>

#include "fuzz_fixtures.h"
#include "hetplan/core/error.h"
#include "hetplan/core/json_util.h"
#include "hetplan/model/graph_json.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace hetplan;
  Json doc;
  try {
    doc = parse_json_unique_keys(fuzz::text_of(data, size));
  } catch (const Json::exception&) {
    return 0;  // not JSON: the readers report it
  } catch (const InputError&) {
    return 0;  // a key given twice, or too deep
  }
  const auto m = model::model_from_json(doc, "fuzz.json");
  if (m) (void)model::to_json(*m).dump();
  return 0;
}
