// Models and clusters for the planner tests.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "hetplan/cluster/cluster_file.h"
#include "hetplan/model/zoo.h"

namespace hetplan::search::testing {

inline model::Model load_model_or_die(const std::string& spec) {
  auto m = model::load_model(spec);
  EXPECT_TRUE(m) << m.error().message;
  return std::move(*m);
}

inline cluster::Cluster load_cluster_or_die(const std::string& spec) {
  auto c = cluster::load_cluster(spec);
  EXPECT_TRUE(c) << c.error().message;
  return std::move(*c);
}

inline std::string data_file(const std::string& name) {
  return std::string(HETPLAN_SOURCE_DIR) + "/tests/search/data/" + name;
}

// Six layers: embedding, four transformer blocks, head.
inline const char* kSmallGpt = "gpt:layers=4,hidden=1024,heads=16,seq=512,vocab=32000";

}  // namespace hetplan::search::testing
