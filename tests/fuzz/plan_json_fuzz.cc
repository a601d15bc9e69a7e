// libFuzzer harness: plan JSON text, parsed, then validated against a small GPT on one DGX A100.
#include "fuzz_fixtures.h"
#include "hetplan/plan/plan_json.h"
#include "hetplan/plan/validate.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace hetplan;
  const auto doc = fuzz::json_of(data, size);
  if (!doc) return 0;
  const auto p = plan::plan_from_json(*doc, "fuzz.json");
  if (!p) return 0;
  (void)plan::to_json_text(*p);
  (void)plan::validate_plan(*p, fuzz::small_model(), fuzz::small_cluster(), "fuzz.json");
  return 0;
}
