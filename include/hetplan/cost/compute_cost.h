// Time of one operator pass on one device for a given shard: a roofline with efficiency curves
// that depend on the op kind and size, replaceable per device type and op kind by a measured
// calibration profile.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hetplan/cluster/device_type.h"
#include "hetplan/core/error.h"
#include "hetplan/core/units.h"
#include "hetplan/cost/memory_cost.h"
#include "hetplan/model/training.h"

namespace hetplan::cost {

// One measured point: an op kind on a device, at a size, took `seconds`.
struct CalibrationPoint {
  double flops = 0;
  double bytes = 0;
  double seconds = 0;
  auto operator<=>(const CalibrationPoint&) const = default;
};

// One measured all-reduce between two worker processes of one host: `bytes` per worker took
// `seconds` (cost/messaging.h fits links to them).
struct MessagingPoint {
  double bytes = 0;
  double seconds = 0;
  auto operator<=>(const MessagingPoint&) const = default;
};

// Host (CPU) time to issue one op's pass of the training graph: the framework's dispatch, autograd
// and the kernel launches. The device runs the kernels behind it asynchronously, so a pass whose
// kernels are shorter than this waits for the host.
struct HostOpTimes {
  double forward_seconds = 0;
  double backward_seconds = 0;
  auto operator<=>(const HostOpTimes&) const = default;
};

// A measured profile (JSON, version 2). For each (device type, op kind) with points, op time is
// interpolated from the points (achieved FLOP/s or B/s against size, log-linear), instead of the
// roofline.
struct CalibrationProfile {
  std::string device;       // catalog name it was measured on
  std::string measured_on;  // date, "2026-11-22"
  std::string notes;
  std::map<std::string, std::map<model::OpKind, std::vector<CalibrationPoint>>>
      points;                                                    // by device type
  std::map<std::string, std::vector<MessagingPoint>> messaging;  // by device type, by size
  // By device type: one optimizer step (the runtime's Adam) of a tensor of `bytes` parameters
  // (the field holds the parameter count) took `seconds`; sorted by size.
  std::map<std::string, std::vector<CalibrationPoint>> optimizer;
  // By device type: the host's time per op of a training pass, measured (calibrate.cc).
  std::map<std::string, HostOpTimes> host;
  bool operator==(const CalibrationProfile&) const = default;
};
// Reading validates every field (errors name the file and the field: "prof.json:
// entries[0].op_kind: unknown op kind 'foo'"), and sorts each entry's points by size. Points of
// GEMM-like kinds (matmul, batched_matmul, moe_router, conv2d) are keyed by `flops`, all others by
// `bytes`; that key must be > 0 and `seconds` > 0. Entries without `device` belong to the profile's
// `device`. An optional "messaging" array holds {"device", "points": [{"bytes", "seconds"}]}
// entries (both > 0), all-reduces between two workers of that device type. An optional
// "optimizer" array holds {"device", "points": [{"params", "seconds"}]} entries (both > 0), an
// optimizer step of a tensor of that many parameters, whose arrays were not in cache (as in
// training, where a step touches each once); the cost model interpolates optimizer steps from
// them (rate in parameters per second, as interpolate_calibrated_time). An optional "host" array
// holds {"device", "forward_seconds", "backward_seconds"} entries (both > 0), one per device type:
// the host's time to issue one op of a forward or backward pass (HostOpTimes). A batched_matmul
// point is one matrix of a batch (its FLOPs, bytes and share of the time): an op of E matrices
// takes E times the time its per-matrix size interpolates to.
Result<CalibrationProfile> read_calibration_profile(const std::string& file);
Result<CalibrationProfile> parse_calibration_profile(const std::string& json_text,
                                                     const std::string& source);
std::string calibration_profile_to_json(const CalibrationProfile& p);

// Time interpolated from measured points of one (device, op kind): the achieved rate (FLOP/s for
// GEMM-like kinds, B/s otherwise) is linear in log(size) between neighbouring points and constant
// beyond the largest one. Below the smallest one, the time is at least `floor_share` of the
// smallest one's: calibrate's smallest probes are small enough that their kernels' fixed cost is
// all they measure, and a point covers a forward and a backward pass, of which the asking pass
// launches that share. `points` sorted by size, not empty.
Seconds interpolate_calibrated_time(const std::vector<CalibrationPoint>& points, model::OpKind kind,
                                    double flops, double bytes, double floor_share = 1.0);

// The global parameters of the roofline; one set serves every device and every run (no per-case
// fitting). Defaults documented in compute_cost.cc with their sources.
struct ComputeParams {
  // Fraction of tensor peak reached by large GEMMs on Ampere (times gemm_architecture_scale on
  // other architectures).
  double gemm_peak_efficiency = 0.0;
  // A GEMM reaches half its peak efficiency at the size the device's peak (of the GEMM's dtype)
  // computes in this time: a device of more compute units needs a larger GEMM to fill them.
  Seconds gemm_half_size_time;
  double memory_efficiency = 0.0;  // fraction of memory bandwidth reached by streaming ops
  Seconds kernel_launch;           // fixed overhead per kernel
  // The host's time to issue one op of a forward or backward pass of a GPU (HostOpTimes), where
  // the calibration profile has no measured one; CPU workers' ops include it already.
  Seconds host_forward_op;
  Seconds host_backward_op;
  // The host's time between two training steps of a GPU (ComputeCostModel::iteration_host_time):
  // a loop synchronises with the device once a step, and the device then waits while the host
  // steps the learning-rate schedule, clears the gradients and fetches the next batch.
  Seconds iteration_host;
  static ComputeParams defaults();
};

// What a GEMM on this architecture reaches of its peak, relative to the Ampere GPUs
// ComputeParams::gemm_peak_efficiency was fitted on (sources in compute_cost.cc): 1 for Ampere and
// for architectures without a published figure.
double gemm_architecture_scale(cluster::Architecture a);

// The fraction of its dtype's dense tensor peak a fused attention kernel of generation `kernel`
// (Attention::flash or flash1) reaches on a device of this architecture, over its forward and
// backward passes (sources in compute_cost.cc).
double fused_attention_efficiency(cluster::Architecture a, Attention kernel = Attention::flash);

// How the engine runs an Adam step (plan::Plan::adam):
// - fused: one multi-tensor kernel over all parameters (Megatron-LM's and DeepSpeed's FusedAdam,
//   PyTorch's fused=True): each parameter's fp32 gradient, master weight and moments read once,
//   the three written, its 16-bit copy written;
// - foreach: PyTorch's multi-tensor AdamW (foreach=True, its default on GPUs): the update as nine
//   separate passes over the parameter lists (scale, two per moment, square root, divide, epsilon,
//   update), each reading and writing whole fp32 tensors;
// - per_tensor: PyTorch's single-tensor AdamW (foreach=False; Hugging Face's and Composer's
//   loops): the same nine passes, tensor by tensor, each of their ops issued by the host in turn.
enum class AdamKernels { fused, foreach, per_tensor };

// Narrow interface: the simulator asks only this.
class ComputeCostModel {
 public:
  ComputeCostModel(ComputeParams params,
                   std::shared_ptr<const CalibrationProfile> profile = nullptr);

  // Time of `op` (one pass of the training graph) on a device of type `dev`, for `samples` samples
  // (a micro-batch; may be fractional for uneven shares) and a fraction `shard` (0 < shard <= 1)
  // of its work (tensor-parallel share; 1 = whole op). Optimizer ops ignore `samples`.
  // Forward/backward: FLOPs and activation bytes (bytes - weight_bytes) scale with samples x shard,
  // weight_bytes with shard only (read once per micro-batch). No samples: no time.
  Seconds op_time(const cluster::DeviceType& dev, const model::TrainOp& op, double samples,
                  double shard, model::DType dtype) const;

  // Time of `op`, a pass of an attention-core op (Op::attention_core), when the core runs as one
  // fused kernel per pass of generation `kernel` (cost::Attention::flash or flash1). The kernel's
  // time is carried by the core's two batched GEMMs (QK^T and scores x V; each its share of the
  // FLOPs), at fused_attention_efficiency of the dtype's peak (fp32's for tf32: no fused kernel
  // computes in TF32), and a kernel launch shared between them; the backward kernel recomputes the
  // scores (2.5x the forward's FLOPs, where the plain backward pass has 2x). The softmax and
  // dropout run inside it: no time of their own. `causal`: the kernel skips the masked half.
  Seconds fused_attention_time(const cluster::DeviceType& dev, const model::TrainOp& op,
                               double samples, double shard, model::DType dtype, bool causal,
                               Attention kernel = Attention::flash) const;

  // Time of the Adam step `op` (an optimizer op) over a fraction `shard` of its parameters, run as
  // `kernels` says. A profile's measured steps for the device type (calibrate: the runtime's own
  // step) stand for every form. Otherwise fused is the roofline of op_time. The unfused forms
  // stream kUnfusedAdamBytesPerParam per parameter; per_tensor visits each of op.tensors (the
  // first holding all the parameters, the rest as small as a bias) with nine kernels issued by
  // eleven host ops (host_op_time's forward figure each), a tensor taking the longer of the two.
  Seconds adam_step_time(const cluster::DeviceType& dev, const model::TrainOp& op, double shard,
                         model::DType dtype, AdamKernels kernels) const;

  // The host's time to issue one op of a forward (or backward) pass on a GPU of type `dev`: the
  // profile's measured figure for the type, else the defaults'. 0 for a CPU worker, which runs
  // its ops where it issues them (their times include it; `calibrate --device cpu` measures the
  // figure all the same: the defaults are that measurement).
  Seconds host_op_time(const cluster::DeviceType& dev, bool forward) const;

  // The host's time between two steps on a GPU of type `dev`, which the device waits through
  // (ComputeParams::iteration_host); 0 for a CPU worker, whose loop's own time is in its ops'.
  Seconds iteration_host_time(const cluster::DeviceType& dev) const;

  const ComputeParams& params() const { return params_; }

 private:
  ComputeParams params_;
  std::shared_ptr<const CalibrationProfile> profile_;
};

}  // namespace hetplan::cost
