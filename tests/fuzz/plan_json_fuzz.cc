// libFuzzer harness: plan JSON text, parsed, then validated against a small GPT on one DGX A100.
#include <nlohmann/json.hpp>

#include "fuzz_fixtures.h"
#include "hetplan/core/error.h"
#include "hetplan/core/json_util.h"
#include "hetplan/plan/plan_json.h"
#include "hetplan/plan/validate.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace hetplan;
  Json doc;
  try {
    doc = parse_json_unique_keys(fuzz::text_of(data, size));
  } catch (const Json::exception&) {
    return 0;
  } catch (const InputError&) {
    return 0;
  }
  const auto p = plan::plan_from_json(doc, "fuzz.json");
  if (!p) return 0;
  (void)plan::to_json_text(*p);
  (void)plan::validate_plan(*p, fuzz::small_model(), fuzz::small_cluster(), "fuzz.json");
  return 0;
}
