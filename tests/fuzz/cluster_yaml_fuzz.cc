// libFuzzer harness: cluster YAML text, parsed, and summarised when it is a cluster.
#include "fuzz_fixtures.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace hetplan;
  const auto c = cluster::parse_cluster_yaml(fuzz::text_of(data, size), "fuzz.yaml");
  if (c) (void)cluster::summarize(*c);
  return 0;
}
