#include "hetplan/plan/gpu_precision.h"

#include <fmt/format.h>

#include "export_parts.h"

namespace hetplan::plan {

GpuPrecision gpu_precision(const Plan& p, const model::Model& m, const cluster::Cluster& c) {
  GpuPrecision out{m.dtype, ""};
  if (m.dtype == model::DType::bf16)
    if (const auto lacking = detail::types_without_bf16(p, c); !lacking.empty()) {
      out.dtype = model::DType::fp16;
      out.why = fmt::format("{} {} no BF16 arithmetic", fmt::join(lacking, ", "),
                            lacking.size() == 1 ? "has" : "have");
      return out;
    }
  return out;
}

}  // namespace hetplan::plan
