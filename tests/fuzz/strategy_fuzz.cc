// libFuzzer harness: a --strategy string, parsed, laid out on a small GPT on one DGX A100, and the
// plan validated.
#include "fuzz_fixtures.h"
#include "hetplan/plan/strategy.h"
#include "hetplan/plan/validate.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace hetplan;
  const auto s = plan::parse_strategy(fuzz::text_of(data, size));
  if (!s) return 0;
  (void)plan::to_string(*s);
  const auto p = plan::plan_from_strategy(*s, fuzz::small_model(), fuzz::small_cluster());
  if (p) (void)plan::validate_plan(*p, fuzz::small_model(), fuzz::small_cluster(), "fuzz");
  return 0;
}
