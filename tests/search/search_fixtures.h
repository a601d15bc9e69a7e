// Models and clusters for the planner tests.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "hetplan/cluster/cluster_file.h"
#include "hetplan/model/zoo.h"
#include "hetplan/plan/strategy.h"
#include "hetplan/search/planners.h"

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

// The plan of a Megatron-style strategy string on c (fails the test when it has none).
inline plan::Plan plan_of(const std::string& strategy, const model::Model& m,
                          const cluster::Cluster& c) {
  auto s = plan::parse_strategy(strategy);
  EXPECT_TRUE(s);
  auto p = plan::plan_from_strategy(*s, m, c);
  EXPECT_TRUE(p) << p.error().message;
  return *p;
}

// A search context on GPT-3 125M and one DGX A100 (8 GPUs), with no time limit: the candidate
// pools' tests offer it plans of their own.
struct PoolCase {
  explicit PoolCase(SearchOptions o = {}) : opts(std::move(o)) {}
  model::Model m = load_model_or_die("gpt3-125m");
  cluster::Cluster c = load_cluster_or_die("dgx-a100:1");
  SearchOptions opts;
  Evaluator evaluator{m, c, opts};
  Estimator estimator{m, c, opts};
  Deadline none{0};
  Context ctx{m, c, opts, evaluator, estimator, none};
};

inline std::string data_file(const std::string& name) {
  return std::string(HETPLAN_SOURCE_DIR) + "/tests/search/data/" + name;
}

// Calls f with every composition of `total` into `parts` positive parts (the layer counts of
// `parts` stages), in lexicographic order; `acc` holds the parts chosen so far.
inline void compositions(int total, int parts, std::vector<int>& acc,
                         const std::function<void(const std::vector<int>&)>& f) {
  if (parts == 1) {
    acc.push_back(total);
    f(acc);
    acc.pop_back();
    return;
  }
  for (int first = 1; first <= total - parts + 1; ++first) {
    acc.push_back(first);
    compositions(total - first, parts - 1, acc, f);
    acc.pop_back();
  }
}

// Six layers: embedding, four transformer blocks, head.
inline const char* kSmallGpt = "gpt:layers=4,hidden=1024,heads=16,seq=512,vocab=32000";

}  // namespace hetplan::search::testing
