// A small unlike cluster and a search context for the op-level search's tests.
#pragma once

#include <string>

#include "hetplan/search/estimate.h"
#include "hetplan/search/evaluate.h"
#include "hetplan/search/planners.h"
#include "search_fixtures.h"

namespace hetplan::search::testing {

// Two nodes of unlike GPUs on 5 Gb/s Ethernet: one V100, two GTX 1080Ti.
inline cluster::Cluster slow_pair() {
  auto c = cluster::parse_cluster_yaml(R"(version: 1
nodes:
  - group: v100
    count: 1
    device: V100-SXM2-16GB
    devices_per_node: 1
    intra_node: {bandwidth: 150GB/s, latency: 2us}
    nic: {bandwidth: 5Gbps, count: 1, latency: 30us}
  - group: 1080ti
    count: 1
    device: GTX-1080Ti
    devices_per_node: 2
    intra_node: {bandwidth: 15.75GB/s, latency: 5us}
    nic: {bandwidth: 5Gbps, count: 1, latency: 30us}
network: {kind: switch}
)",
                                       "slow-pair.yaml");
  EXPECT_TRUE(c) << c.error().message;
  return std::move(*c);
}

struct Fixture {
  model::Model m;
  cluster::Cluster c;
  SearchOptions opts;
  Evaluator evaluator;
  Estimator estimator;
  Deadline deadline{0};
  Context ctx;
  Fixture(const std::string& model, cluster::Cluster cl, std::int64_t batch)
      : m(load_model_or_die(model)),
        c(std::move(cl)),
        opts(options(batch)),
        evaluator(m, c, opts),
        estimator(m, c, opts),
        ctx{m, c, opts, evaluator, estimator, deadline} {}
  static SearchOptions options(std::int64_t batch) {
    SearchOptions o;
    o.global_batch = batch;
    return o;
  }
};

}  // namespace hetplan::search::testing
