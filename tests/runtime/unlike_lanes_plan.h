// A plan file the runtime tests share: four stages of a GPT of 4 blocks under the interleaved
// schedule on two device groups, {0} and {1} (batch shares 0.5/0.5, then 0.75/0.25) and a replica
// of {2, 3} (tensor-parallel shares 0.75/0.25), twice.
#pragma once

#include <string>

namespace hetplan::runtime::testing {

// Its JSON text, with `last` the fourth stage's replica (by default the second stage's).
inline std::string unlike_lanes_plan(
    const std::string& last =
        R"({"devices": [2, 3], "tp_shares": [0.75, 0.25], "batch_share": 1})") {
  return R"({"version": 1, "global_batch": 12,
    "num_microbatches": 2, "schedule": "interleaved", "stages": [
      {"first_layer": 0, "num_layers": 2, "replicas": [
        {"devices": [0], "batch_share": 0.5}, {"devices": [1], "batch_share": 0.5}]},
      {"first_layer": 2, "num_layers": 1, "replicas": [
        {"devices": [2, 3], "tp_shares": [0.75, 0.25], "batch_share": 1}]},
      {"first_layer": 3, "num_layers": 2, "replicas": [
        {"devices": [0], "batch_share": 0.75}, {"devices": [1], "batch_share": 0.25}]},
      {"first_layer": 5, "num_layers": 1, "replicas": [)" +
         last + "]}]}";
}

}  // namespace hetplan::runtime::testing
