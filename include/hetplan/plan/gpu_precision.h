// The arithmetic a plan trains in on its GPUs where neither the plan nor the command line names
// one: the model's dtype, in which the plan was priced, as far as the GPUs and the runtime's form
// for the plan allow. `hetplan run --device cuda` takes it, and `export --to torchrun` writes it.
#pragma once

#include <string>

#include "hetplan/cluster/cluster.h"
#include "hetplan/model/model.h"
#include "hetplan/plan/plan.h"

namespace hetplan::plan {

struct GpuPrecision {
  model::DType dtype = model::DType::fp32;
  // Why it is not the model's dtype ("V100-SXM2-32GB (Volta) has no BF16 arithmetic"); empty
  // where it is.
  std::string why;
};

// The model's dtype, except: bf16 on a plan that uses a device type without BF16 (Pascal, Volta,
// Turing) becomes fp16 under loss scaling (hetplan prices either 16-bit type at the same rate),
// stage plans and op-level plans alike.
GpuPrecision gpu_precision(const Plan& p, const model::Model& m, const cluster::Cluster& c);

}  // namespace hetplan::plan
