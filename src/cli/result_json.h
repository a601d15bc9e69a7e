// Internal to the command line: the JSON form of a simulation result.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hetplan/cluster/cluster.h"
#include "hetplan/model/model.h"
#include "hetplan/plan/plan.h"
#include "hetplan/sim/simulate.h"

namespace hetplan::cli {

nlohmann::ordered_json sim_result_json(const model::Model& m, const cluster::Cluster& c,
                                       const plan::Plan& p, const sim::SimResult& r);

// What the devices a simulated plan uses cost to rent: "$0.0123 per iteration ($20.60 per hour for
// 12 devices)", or which of their types have no price.
std::string price_text(const cluster::Cluster& c, const sim::SimResult& r);

// The samples of each global batch that one device type's devices in one stage process: each
// replica's samples, shared among its devices' types by their tensor-parallel shares (so that a
// stage's entries sum to the global batch). Stages in order, types in first-use order; empty for
// an op-level plan.
struct TypeSamples {
  int stage = 0;
  std::string device_type;
  int devices = 0;
  double samples = 0;
};
std::vector<TypeSamples> samples_by_device_type(const plan::Plan& p, const cluster::Cluster& c);

// The same as one line: "A100-SXM4-40GB x16: 300, V100-SXM2-32GB x16: 212", stage by stage
// ("stage 0: ...; stage 1: ...") when the stages differ; "" for an op-level plan.
std::string samples_by_device_type_text(const plan::Plan& p, const cluster::Cluster& c);

}  // namespace hetplan::cli
