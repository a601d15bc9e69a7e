// Measures the op kinds the cost model knows on the local device with libtorch, over a range of
// sizes, and returns them as a calibration profile the cost model reads (cost/compute_cost.h).
#pragma once

#include <functional>
#include <string>

#include "hetplan/core/error.h"
#include "hetplan/cost/compute_cost.h"

namespace hetplan::runtime {

struct CalibrateOptions {
  std::string device = "cpu";       // "cpu" or "cuda"
  std::string device_type = "cpu";  // the catalog name the points are filed under
  int threads = 1;                  // intra-op threads (cpu), as each `hetplan run` worker uses
  double seconds_per_point = 0.1;  // time each measurement for at least this long
  int sizes = 7;                    // sizes per op kind, growing geometrically
  std::string measured_on;          // date written into the profile
};

// Every op kind gets `sizes` points, each one forward and backward pass (so the rate it records is
// what training reaches, transposed GEMMs included), filed under the pass pair's FLOPs and bytes as
// the training graph counts them. GEMM-like kinds are keyed by FLOPs, the others by bytes.
// Times are in the runtime's dtype: fp32 on CPU, bf16 on CUDA.
Result<cost::CalibrationProfile> calibrate(const CalibrateOptions& opts,
                                           const std::function<void(const std::string&)>& progress);

}  // namespace hetplan::runtime
