// Roofline op time: max(compute-bound, memory-bound) + kernel launch, with a saturating efficiency
// curve for GEMMs; a calibration profile, where it has points for (device, op kind), replaces it.
#include "hetplan/cost/compute_cost.h"

#include <algorithm>
#include <cassert>

#include "hetplan/cost/op_kinds.h"

namespace hetplan::cost {

// Defaults, from ../shared/reference/hardware.md ("Achieved rates"):
// - gemm_peak_efficiency 0.72: sustained tensor-core efficiency of large BF16 GEMMs inside a
//   training step. The best isolated matmuls reach 87% of peak on A100 SXM, 81% on A100 PCIe and
//   80% on H100 SXM; the prose there gives 70 to 85% for large GEMMs. 0.72, at the low end of that
//   range, was chosen once, globally, against the Megatron-LM scaling table
//   (tests/sim/megatron_accuracy_test.cc): 0.80 over-predicted every row (mean error 8.4%), 0.72
//   gives a mean absolute error of 3.5% with the same value for every row and device.
// - gemm_half_size_time 9.6 us: a GEMM runs at half that efficiency at the size the device's peak
//   computes in 9.6 us: 3 GFLOP on an A100 (312 TFLOP/s BF16), so a 1024^3 GEMM (2.1 GFLOP)
//   reaches 0.41 of it there and the 50+ GFLOP GEMMs of large LLM layers 0.95+; small and skinny
//   GEMMs are latency- and tile-bound (wave quantization), which this curve stands in for. Chosen
//   with gemm_peak_efficiency in the same single global fit (as 3 GFLOP on the A100s of that
//   table). Scaled by each device's peak, the threshold follows its width: 9.5 GFLOP on an H100,
//   1.2 GFLOP on a V100, 1 MFLOP on a 100 GFLOP/s CPU worker (as a fixed FLOP count it put a
//   41 ms floor under every GEMM there).
// - memory_efficiency 0.85: memory copies reach 80 to 90% of the data-sheet bandwidth.
// - kernel_launch 3 us: per kernel on the GPU stream (launch plus inter-kernel gap, a few us).
// - host_forward_op 15 us, host_backward_op 15 us: the host's time to issue one op of the training
//   graph in a forward and in a backward pass (the framework's dispatch, autograd, the launches),
//   as eager PyTorch from Python (what Megatron-LM, llm-foundry and Hugging Face run) takes it:
//   `scripts/host_overhead.py` trains GPTs of width 8 over 4 tokens, whose kernels take next to
//   nothing, and measured 14.1-15.1 us per op forward and 14.9-16.3 us backward (PyTorch 1.13,
//   one core of the development machine, 2026-11-30). hetplan's own runtime issues its ops from
//   C++: 6.0 us forward and 13.8 us backward there; `hetplan calibrate` measures that on the
//   device it runs on, into the profile's "host" section, which then replaces these figures.
// - iteration_host 1.3 ms: what the host does between two steps while the device waits (a
//   training loop synchronises once a step: Megatron-LM reads the gradient norm back, Hugging
//   Face checks each loss for NaN, most log the loss), then the learning-rate schedule, clearing
//   the gradients and the next batch: `scripts/iteration_overhead.py` measured 1.25-1.35 ms with
//   two loader workers (Megatron-LM's default; llm-foundry's yamls have 8), nearly all of it the
//   batch's passage from the worker process, and 67 us with the batch loaded in the loop (Hugging
//   Face's default of none) (PyTorch 1.13, the development machine, 2026-11-30).
// One set for every device and run; the simulator's accuracy check tunes them here, nowhere else.
ComputeParams ComputeParams::defaults() {
  ComputeParams p;
  p.gemm_peak_efficiency = 0.72;
  p.gemm_half_size_time = Seconds(3e9 / 312e12);
  p.memory_efficiency = 0.85;
  p.kernel_launch = Seconds(3e-6);
  p.host_forward_op = Seconds(15e-6);
  p.host_backward_op = Seconds(15e-6);
  p.iteration_host = Seconds(1.3e-3);
  return p;
}

ComputeCostModel::ComputeCostModel(ComputeParams params,
                                   std::shared_ptr<const CalibrationProfile> profile)
    : params_(params), profile_(std::move(profile)) {}

namespace {

const std::vector<CalibrationPoint>* find_points(const CalibrationProfile* profile,
                                                 const std::string& device, model::OpKind kind) {
  if (profile == nullptr) return nullptr;
  auto dev = profile->points.find(device);
  if (dev == profile->points.end()) return nullptr;
  auto it = dev->second.find(kind);
  if (it == dev->second.end() || it->second.empty()) return nullptr;
  return &it->second;
}

}  // namespace

Seconds ComputeCostModel::op_time(const cluster::DeviceType& dev, const model::TrainOp& op,
                                  double samples, double shard, model::DType dtype) const {
  assert(shard >= 0 && samples >= 0);
  const bool optimizer = op.phase == model::Phase::optimizer;
  if (!optimizer && samples <= 0) return Seconds(0);
  const double flops = op.flops * shard * (optimizer ? 1.0 : samples);
  const double bytes = optimizer
                           ? op.bytes * shard
                           : ((op.bytes - op.weight_bytes) * samples + op.weight_bytes) * shard;
  if (flops <= 0 && bytes <= 0) return Seconds(0);

  // The optimizer step is fp32 streaming (Adam) whatever the forward op's kind: never calibrated
  // by that kind, never a GEMM; measured steps of the device, where the profile has them, keyed by
  // parameters (a step costs at least the smallest measured one: its fixed cost).
  if (optimizer && profile_ && op.params > 0) {
    auto it = profile_->optimizer.find(dev.name);
    if (it != profile_->optimizer.end() && !it->second.empty())
      return interpolate_calibrated_time(it->second, model::OpKind::elementwise, 0,
                                         op.params * shard);
  }
  const bool gemm = !optimizer && is_gemm_like(op.kind);
  if (!optimizer) {
    if (const auto* pts = find_points(profile_.get(), dev.name, op.kind)) {
      if ((gemm ? flops : bytes) > 0) {
        // A point times a forward and a backward pass: a GEMM's forward is one of its three
        // GEMMs; another op's forward moves about two fifths of the bytes (calibrate.cc).
        const bool forward = op.phase == model::Phase::forward;
        const double part = gemm ? (forward ? 1.0 / 3 : 2.0 / 3) : (forward ? 0.4 : 0.6);
        Seconds t;
        if (op.kind == model::OpKind::batched_matmul && op.gemm.batch_count > 0) {
          // Points of batched GEMMs are per matrix of the batch (calibrate.cc): the op's matrices
          // (per sample, times the samples and this shard's heads) each at the rate of its size.
          const double entries =
              std::max(1.0, static_cast<double>(op.gemm.batch_count) * samples * shard);
          t = entries *
              interpolate_calibrated_time(*pts, op.kind, flops / entries, bytes / entries, part);
        } else {
          t = interpolate_calibrated_time(*pts, op.kind, flops, bytes, part);
        }
        // A GEMM with few rows streams its weights more than it computes (one row: a
        // matrix-vector product): no faster than the device's measured streaming rate moves its
        // bytes. The calibrated GEMMs are square, so their rates say nothing about this.
        if (gemm && bytes > 0)
          if (const auto* stream =
                  find_points(profile_.get(), dev.name, model::OpKind::elementwise))
            t = max(t, interpolate_calibrated_time(*stream, model::OpKind::elementwise, 0, bytes,
                                                   part));
        return t;
      }
    }
  }

  // Compute-bound: GEMMs on tensor cores at a size-dependent fraction of the dtype's peak; other
  // ops on the vector units (FP32 peak; they are memory-bound in practice).
  double compute_s = 0;
  if (flops > 0) {
    double rate = 0;
    if (gemm) {
      const double peak = dev.peak(dtype).value;
      const double half = params_.gemm_half_size_time.value * peak;
      rate = peak * params_.gemm_peak_efficiency * gemm_architecture_scale(dev.architecture) *
             flops / (flops + half);
    } else {
      rate = dev.peak_fp32.value > 0 ? dev.peak_fp32.value : dev.peak(dtype).value;
    }
    assert(rate > 0);
    compute_s = flops / rate;
  }
  const double memory_s =
      bytes > 0 ? bytes / (dev.memory_bandwidth.value * params_.memory_efficiency) : 0.0;
  return Seconds(std::max(compute_s, memory_s)) + params_.kernel_launch;
}

namespace {

// PyTorch's AdamW without fusion (torch/optim/adamw.py, _single_tensor_adamw and
// _multi_tensor_adamw, PyTorch 1.13): per parameter the weight decay (read and write 4 bytes), the
// first moment's scale and add (8, then 12 with the gradient), the second moment's scale and
// addcmul (8, 12), the square root, its division and epsilon (8 each, into a new tensor) and the
// addcdiv update (16): 88 bytes over nine kernels. The single-tensor loop also counts the step on
// the host and reads it back (step_t += 1, step_t.item()): eleven host ops per tensor.
constexpr double kUnfusedAdamBytesPerParam = 88;
constexpr int kUnfusedAdamKernels = 9;
constexpr int kPerTensorAdamHostOps = 11;

}  // namespace

Seconds ComputeCostModel::adam_step_time(const cluster::DeviceType& dev, const model::TrainOp& op,
                                         double shard, model::DType dtype,
                                         AdamKernels kernels) const {
  assert(op.phase == model::Phase::optimizer);
  const bool calibrated = profile_ && profile_->optimizer.count(dev.name) > 0;
  if (kernels == AdamKernels::fused || calibrated || op.params <= 0)
    return op_time(dev, op, 1.0, shard, dtype);
  const double params = op.params * shard;
  const double compute_rate = dev.peak_fp32.value > 0 ? dev.peak_fp32.value : dev.peak(dtype).value;
  const double stream = std::max(op.flops * shard / compute_rate,
                                 kUnfusedAdamBytesPerParam * params /
                                     (dev.memory_bandwidth.value * params_.memory_efficiency));
  if (kernels == AdamKernels::foreach) return Seconds(stream) + params_.kernel_launch;
  const double host = kPerTensorAdamHostOps * host_op_time(dev, true).value;
  const double launches = kUnfusedAdamKernels * params_.kernel_launch.value;
  const int small = std::max(op.tensors, 1) - 1;
  return Seconds(std::max(host, launches + stream) + small * std::max(host, launches));
}

Seconds ComputeCostModel::iteration_host_time(const cluster::DeviceType& dev) const {
  return dev.architecture == cluster::Architecture::cpu ? Seconds(0) : params_.iteration_host;
}

Seconds ComputeCostModel::host_op_time(const cluster::DeviceType& dev, bool forward) const {
  // A CPU worker issues and runs its ops on the same cores: one after the other, in the op
  // times (their calibrated points include it), not beside them.
  if (dev.architecture == cluster::Architecture::cpu) return Seconds(0);
  if (profile_) {
    auto it = profile_->host.find(dev.name);
    if (it != profile_->host.end())
      return Seconds(forward ? it->second.forward_seconds : it->second.backward_seconds);
  }
  return forward ? params_.host_forward_op : params_.host_backward_op;
}

// GEMM efficiency by architecture, relative to Ampere's (where gemm_peak_efficiency was fitted), as
// BF16 matmuls of each reach of their data-sheet peak, against A100 SXM's best measured 271 of 312
// TFLOP/s (87%; shared/reference/hardware.md, "Achieved rates"):
// - Hopper 0.70 / 0.87, fitted (one constant for every Hopper device) on Megatron-Core's H100 weak
//   scaling (data/measured/h100-megatron-core.csv, 9 runs of 1.7B to 462B: mean absolute error
//   6.6%). The best measured matmul, 795 of 989 (80%), left all nine 2-22% too fast, and
//   llm-foundry's independent H100 runs 21.6%; with 0.70 those are 13.1%. An H200 (the same SMs
//   and power limit) measured 0.68 to 0.81 on square matmuls of 2,048 to 16,384
//   (data/gpu/h200-microbench-2026-11-28.json): a training step's GEMMs, at sustained clocks and
//   beside its other kernels, sit at the low end.
// - CDNA3 0.51 / 0.87: MI300X's best measured, 668 of 1,307.
// No figure was found for the other architectures: Ampere's (1) stands in.
double gemm_architecture_scale(cluster::Architecture a) {
  switch (a) {
    case cluster::Architecture::hopper:
      return 0.70 / 0.87;
    case cluster::Architecture::cdna3:
      return 0.51 / 0.87;
    case cluster::Architecture::pascal:
    case cluster::Architecture::volta:
    case cluster::Architecture::turing:
    case cluster::Architecture::ampere:
    case cluster::Architecture::ada:
    case cluster::Architecture::cdna2:
    case cluster::Architecture::cpu:
    case cluster::Architecture::unknown:
      return 1.0;
  }
  return 1.0;
}

// Fused attention (FlashAttention) efficiency, as a fraction of the dense 16-bit tensor peak over a
// forward and a backward pass, from the kernels' published benchmarks:
// - Ampere 0.50: FlashAttention-2 (Dao 2023, arXiv:2307.08691) reaches 50-73% of the A100's peak;
//   the low end, as training's sequences (0.5-4k tokens) and the backward pass (5/7 of the work)
//   sit there.
// - Hopper 0.34: the same FlashAttention-2 kernels, which PyTorch's scaled_dot_product_attention
//   runs, reach up to 335 TFLOP/s on an H100 SXM5 (same paper), 34% of its 989. FlashAttention-3
//   (Shah et al. 2024, arXiv:2407.08608) reaches 75% but is a separate library, not what this
//   figure describes.
// - Volta, Turing, Pascal 0.25: no FlashAttention-2 kernels; PyTorch runs its memory-efficient
//   kernel there. No published figure for it on these parts: the first FlashAttention's 25-40%
//   of the A100's peak (the FlashAttention-2 paper's account of it), at its low end, stands in.
// - Ada, CDNA2, CDNA3 and unknown: no published figure found; Ampere's (the nearest kernels:
//   FlashAttention-2 builds for sm_89, and ROCm's port of it) stands in.
//
// The first FlashAttention's kernels (Attention::flash1) reach less. The FlashAttention-2 paper
// puts them at 25-40% of the A100's peak and FlashAttention-2 at 1.3-2.5x their Triton port;
// Ampere's 0.32 is the middle of the first range and inside the second. With it the error of
// llm-foundry's mpt-125m runs on A100, which ran the Triton port
// (data/measured/a100-mpt-small.csv), goes from -8.0% at 512 tokens to -5.0% at 8,192 (at
// FlashAttention-2's 0.50: -10.0% to -22.2%). No published figure for them on Hopper, which they
// predate: Hopper's FlashAttention-2 figure scaled by Ampere's ratio of the two (0.64) gives 0.22.
// Where FlashAttention-2 has no kernels (Volta, Turing, Pascal) neither has the first: the
// memory-efficient kernel's 0.25 stands.
double fused_attention_efficiency(cluster::Architecture a, Attention kernel) {
  const bool first = kernel == Attention::flash1;
  switch (a) {
    case cluster::Architecture::hopper:
      return first ? 0.22 : 0.34;
    case cluster::Architecture::pascal:
    case cluster::Architecture::volta:
    case cluster::Architecture::turing:
      return 0.25;
    case cluster::Architecture::ampere:
    case cluster::Architecture::ada:
    case cluster::Architecture::cdna2:
    case cluster::Architecture::cdna3:
    case cluster::Architecture::cpu:
    case cluster::Architecture::unknown:
      break;
  }
  return first ? 0.32 : 0.50;
}

Seconds ComputeCostModel::fused_attention_time(const cluster::DeviceType& dev,
                                               const model::TrainOp& op, double samples,
                                               double shard, model::DType dtype, bool causal,
                                               Attention kernel) const {
  assert(shard >= 0 && samples >= 0);
  if (op.kind != model::OpKind::batched_matmul || samples <= 0 || op.flops <= 0) return Seconds(0);
  const bool forward = op.phase == model::Phase::forward;
  // A plain backward pass of a batched GEMM has 2x its forward's FLOPs; the fused one 2.5x.
  const double flops = op.flops * samples * shard * (forward ? 1.0 : 1.25) * (causal ? 0.5 : 1.0);
  // No fused kernel computes in TF32: PyTorch's memory-efficient kernel runs fp32 on the vector
  // units.
  const model::DType kernel_dtype = dtype == model::DType::tf32 ? model::DType::fp32 : dtype;
  const double rate =
      dev.peak(kernel_dtype).value * fused_attention_efficiency(dev.architecture, kernel);
  assert(rate > 0);
  return Seconds(flops / rate) + params_.kernel_launch * 0.5;
}

}  // namespace hetplan::cost
