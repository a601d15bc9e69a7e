// The cluster tests' parse of a YAML text that must be valid.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "hetplan/cluster/cluster_file.h"

namespace hetplan::cluster::testing {

// The cluster of `text`; a test failure (and an empty cluster) when it does not parse.
inline Cluster parse(const std::string& text) {
  auto r = parse_cluster_yaml(text, "t.yaml");
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : Cluster{};
}

}  // namespace hetplan::cluster::testing
