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
  double seconds_per_point = 0.1;   // time each measurement for at least this long
  int sizes = 7;                    // sizes per op kind, growing geometrically
  std::string measured_on;          // date written into the profile
};

// Every op kind gets `sizes` points, each one forward and backward pass (so the rate it records is
// what training reaches, transposed GEMMs included), filed under the pass pair's FLOPs and bytes as
// the training graph counts them, each the median of three rounds over all probes. GEMM-like kinds
// are keyed by FLOPs, the others by bytes. The optimizer gets up to 7 points (1 Ki to 4 Mi
// parameters, 4x apart): the runtime's Adam step, its arrays out of cache, the median of three
// rounds.
// Times are in the runtime's dtype: fp32 on CPU, bf16 on CUDA.
Result<cost::CalibrationProfile> calibrate(const CalibrateOptions& opts,
                                           const std::function<void(const std::string&)>& progress);

// All-reduces between two worker processes of this host, as `hetplan run --nprocs 2` talks (Gloo
// over loopback): starts two copies of this executable with `worker_args`, which must make them
// call messaging_worker(out_file), and returns the points rank 0 wrote there, by size.
Result<std::vector<cost::MessagingPoint>> calibrate_messaging(
    const std::vector<std::string>& worker_args, const std::string& out_file);

// A worker's part: joins the job the environment describes (RANK, WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT), times fp32 all-reduces of 64 B to 4 MiB, 16x apart (each size: 3 warm-up calls,
// then the mean of 240 in 8 rounds in which the sizes take turns, each call after a few hundred
// microseconds of compute, as a training step calls them), and rank 0 writes the points to
// out_file (JSON: [{"bytes", "seconds"}, ...]).
Result<bool> messaging_worker(const std::string& out_file);

}  // namespace hetplan::runtime
