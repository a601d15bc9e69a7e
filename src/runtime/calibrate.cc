#include "hetplan/runtime/calibrate.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <vector>

#include "heap.h"
#include "hetplan/cost/op_kinds.h"
#include "hetplan/model/zoo.h"
#include "tensor_parallel.h"
#include "torch_modules.h"

namespace hetplan::runtime {
namespace {

using Clock = std::chrono::steady_clock;
using model::OpKind;

// One op at one size: what it computes and moves, and how to run it once.
struct Probe {
  double flops = 0;  // forward pass
  double read = 0;   // forward bytes read (weights included)
  double written = 0;
  std::int64_t entries = 1;  // matrices of a batched GEMM: the figures above are per matrix
  std::vector<torch::Tensor> inputs;  // the float operands the backward pass differentiates
  std::function<torch::Tensor()> run;
};

// The middle value (the upper one of an even count), reordering `v`; v not empty.
double median(std::vector<double>& v) {
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

class Timer {
 public:
  Timer(torch::Device dev, double min_seconds) : dev_(dev), min_s_(min_seconds) {}
  // Seconds per forward and backward pass: one warm-up, then each pass timed on its own until
  // min_seconds have passed (at least 5 passes); the median, so that a pass that an interrupt or
  // a page fault stretched does not move the figure. The gradients are returned, not
  // accumulated into the inputs.
  double time(const Probe& p) const {
    auto once = [&p] {
      torch::Tensor y = p.run();
      return torch::autograd::grad({y}, p.inputs, {torch::ones_like(y)})[0];
    };
    sync(once());
    std::vector<double> runs;
    const auto start = Clock::now();
    while (runs.size() < 5 ||
           std::chrono::duration<double>(Clock::now() - start).count() < min_s_) {
      const auto t0 = Clock::now();
      sync(once());
      runs.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      if (runs.size() >= 100000) break;
    }
    return median(runs);
  }

 private:
  void sync(const torch::Tensor& t) const {
    if (dev_.is_cuda()) torch::cuda::synchronize();
    (void)t;
  }
  torch::Device dev_;
  double min_s_;
};

// Probes of one kind at size index i of count (larger i, larger problem).
Probe probe(OpKind kind, int i, int count, const torch::TensorOptions& o) {
  const double eb = static_cast<double>(torch::elementSize(torch::typeMetaToScalarType(o.dtype())));
  const auto s = static_cast<std::int64_t>(16) << i;  // 16 .. 16 * 2^(n-1)
  // Rows of memory-bound ops, 1 to 4096 geometrically: one row of 1024 is a kernel's fixed cost.
  const std::int64_t rows = 1LL << (12 * i / (count - 1));
  const std::int64_t width = 1024;
  Probe p;
  switch (kind) {
    case OpKind::matmul:
    case OpKind::moe_router: {
      const std::int64_t n = kind == OpKind::matmul ? s : 8;
      auto a = torch::randn({s, s}, o), b = torch::randn({s, n}, o);
      p.flops = 2.0 * s * s * n;
      p.read = eb * (s * s + s * n);
      p.written = eb * s * n;
      p.inputs = {a, b};
      p.run = [a, b] { return torch::matmul(a, b); };
      break;
    }
    case OpKind::batched_matmul: {
      // Attention's shape (s x 64 by 64 x s, as QK^T); the figures are per matrix of the batch,
      // as the points are filed (a CPU multiplies a batch's matrices one by one, so a batch of
      // many small ones runs at a small one's rate). The operands are the 16 heads of an
      // [s, 16 x 64] projection output, viewed per head (strided, as the runtime's attention
      // takes Q and K), so the probe pays the copies that multiplying such views takes.
      p.entries = 16;
      auto qa = torch::randn({s, p.entries, 64}, o), kb = torch::randn({s, p.entries, 64}, o);
      p.flops = 2.0 * s * 64 * s;
      p.read = eb * 2 * s * 64;
      p.written = eb * s * s;
      p.inputs = {qa, kb};
      p.run = [qa, kb] {
        return torch::matmul(qa.transpose(0, 1), kb.transpose(0, 1).transpose(-2, -1));
      };
      break;
    }
    case OpKind::conv2d: {
      const std::int64_t c = std::max<std::int64_t>(8, s / 2);
      auto x = torch::randn({1, c, 32, 32}, o), w = torch::randn({c, c, 3, 3}, o);
      p.flops = 2.0 * c * c * 9 * 32 * 32;
      p.read = eb * (c * 32 * 32 + c * c * 9);
      p.written = eb * c * 32 * 32;
      p.inputs = {x, w};
      p.run = [x, w] { return torch::conv2d(x, w, {}, 1, 1); };
      break;
    }
    case OpKind::softmax: {
      // The models' softmax is attention's scaled, causally masked one (Megatron-LM fuses the
      // three): rows of scores scaled, masked above the diagonal of each width x width block
      // (one mask for every block, as the runtime's attention broadcasts its causal mask) and
      // normalised.
      const std::int64_t block = std::min(rows, width);
      auto x = torch::randn({rows / block, block, width}, o);
      auto mask =
          torch::ones({width, width}, torch::TensorOptions().dtype(torch::kBool).device(o.device()))
              .triu(1)
              .slice(0, 0, block);
      p.read = p.written = eb * rows * width;
      p.flops = 5.0 * rows * width;
      p.inputs = {x};
      p.run = [x, mask] {
        return torch::softmax((x / 8.0).masked_fill(mask, -std::numeric_limits<float>::infinity()),
                              -1);
      };
      break;
    }
    case OpKind::layernorm: {
      auto x = torch::randn({rows, width}, o), w = torch::ones({width}, o),
           b = torch::zeros({width}, o);
      p.read = p.written = eb * rows * width;
      p.flops = 8.0 * rows * width;
      p.inputs = {x, w, b};
      p.run = [x, w, b, width] { return torch::layer_norm(x, {width}, w, b); };
      break;
    }
    case OpKind::rmsnorm: {
      auto x = torch::randn({rows, width}, o), w = torch::ones({width}, o);
      p.read = p.written = eb * rows * width;
      p.flops = 4.0 * rows * width;
      p.inputs = {x, w};
      p.run = [x, w] { return x * torch::rsqrt(x.pow(2).mean(-1, true) + 1e-6) * w; };
      break;
    }
    case OpKind::elementwise: {
      auto x = torch::randn({rows, width}, o);
      p.read = p.written = eb * rows * width;
      p.flops = 8.0 * rows * width;
      p.inputs = {x};
      p.run = [x] { return torch::gelu(x); };
      break;
    }
    case OpKind::embedding: {
      // A table as large as the rows looked up: the backward pass writes a dense gradient of the
      // whole table (as the runtime's embeddings do), so a fixed large table would put its
      // zeroing under every point and price a small model's lookups as a large vocabulary's.
      const std::int64_t ids_n = rows * 4;
      auto table = torch::randn({ids_n, 256}, o);
      auto ids = torch::randint(0, ids_n, {ids_n}, o.dtype(torch::kLong));
      p.read = p.written = eb * ids_n * 256;
      p.inputs = {table};
      p.run = [table, ids] { return torch::embedding(table, ids); };
      break;
    }
    case OpKind::pool: {
      const std::int64_t c = 8LL << i;
      auto x = torch::randn({1, c, 56, 56}, o);
      p.read = eb * c * 56 * 56;
      p.written = eb * c * 28 * 28;
      p.flops = 9.0 * c * 28 * 28;
      p.inputs = {x};
      p.run = [x] { return torch::max_pool2d(x, 3, 2, 1); };
      break;
    }
    case OpKind::batchnorm: {
      const std::int64_t c = 8LL << i;
      auto x = torch::randn({4, c, 28, 28}, o), w = torch::ones({c}, o), b = torch::zeros({c}, o);
      p.read = p.written = eb * 4 * c * 28 * 28;
      p.flops = 8.0 * 4 * c * 28 * 28;
      p.inputs = {x, w, b};
      // As the runtime's modules normalise (one replica's statistics: no group).
      p.run = [x, w, b] { return detail::batch_norm_over_group(x, w, b, nullptr); };
      break;
    }
    case OpKind::cross_entropy: {
      auto x = torch::randn({rows, width}, o);
      auto y = torch::randint(0, width, {rows}, o.dtype(torch::kLong));
      p.read = eb * rows * width;
      p.written = eb * rows;
      p.flops = 5.0 * rows * width;
      p.inputs = {x};
      p.run = [x, y] { return torch::nn::functional::cross_entropy(x, y); };
      break;
    }
  }
  return p;
}

// Seconds of one Adam step (the runtime's optimizer) of a tensor of `params` parameters, the mean
// over steps of sets of tensors taken in turn, enough of them (up to 4096) that together they
// exceed 64 MB, twice the last-level cache of the machine this was written on: in training a step
// touches each parameter, gradient and moment once, so they are not in cache, and a probe that
// stepped one small tensor again and again would find them there (a million parameters took 4.2 ns
// each from memory, 1.4 ns from cache, on the machine this was written on).
double time_optimizer_step(std::int64_t params, const torch::Device& dev, double min_seconds) {
  const auto o = torch::TensorOptions().device(dev).dtype(torch::kFloat);
  constexpr double kColdBytes = 64e6;
  const double set_bytes = 16.0 * static_cast<double>(params);  // weight, gradient, two moments
  const auto sets =
      static_cast<std::size_t>(std::clamp(std::ceil(kColdBytes / set_bytes), 1.0, 4096.0));
  std::vector<std::unique_ptr<torch::optim::Adam>> steps;  // each holds its tensor
  for (std::size_t k = 0; k < sets; ++k) {
    auto w = torch::randn({params}, o).requires_grad_(true);
    w.mutable_grad() = torch::randn({params}, o);
    steps.push_back(std::make_unique<torch::optim::Adam>(std::vector<torch::Tensor>{w},
                                                         torch::optim::AdamOptions(1e-3)));
    steps.back()->step();  // allocates the moments
  }
  auto sync = [&] {
    if (dev.is_cuda()) torch::cuda::synchronize();
  };
  sync();
  double total = 0;
  std::size_t count = 0;
  const auto start = Clock::now();
  while (count < 5 * sets ||
         std::chrono::duration<double>(Clock::now() - start).count() < min_seconds)
    for (auto& step : steps) {
      const auto t0 = Clock::now();
      step->step();
      sync();
      total += std::chrono::duration<double>(Clock::now() - t0).count();
      ++count;
    }
  return total / static_cast<double>(count);
}

// The host's time to issue one op of a forward and of a backward pass (cost::HostOpTimes): GPTs of
// 2 and 6 blocks of width 8 over 4 tokens, whose kernels take next to nothing, trained (the
// runtime's module, summed loss, backward) back to back with one synchronisation per run of
// passes, so that the host's issuing paces them; the 4 blocks the second has more, per op of
// them. The median of `rounds` runs of each.
cost::HostOpTimes time_host_ops(const torch::Device& dev, double min_seconds, int rounds) {
  struct Timed {
    double forward = 0, both = 0;
    std::size_t ops = 0;
  };
  auto run = [&](int layers) {
    const model::Model m =
        model::load_model(fmt::format("gpt:layers={},hidden=8,heads=2,seq=4,vocab=16", layers))
            .value();
    auto mod = detail::build_module(m).value();
    mod->to_device(dev);
    const auto ids = torch::TensorOptions().device(dev).dtype(torch::kLong);
    const detail::Batch b{torch::randint(0, m.vocab, {1, m.seq_len}, ids),
                          torch::randint(0, m.vocab, {1, m.seq_len}, ids)};
    auto per_pass = [&](bool backward) {
      auto pass = [&] {
        torch::Tensor loss = mod->loss_sum(b);
        if (backward) loss.backward();
        return loss;
      };
      pass();
      if (dev.is_cuda()) torch::cuda::synchronize();
      std::vector<double> runs;
      const auto start = Clock::now();
      while (runs.size() < static_cast<std::size_t>(rounds) ||
             std::chrono::duration<double>(Clock::now() - start).count() < min_seconds) {
        constexpr int kPasses = 20;
        const auto t0 = Clock::now();
        for (int i = 0; i < kPasses; ++i) pass();
        if (dev.is_cuda()) torch::cuda::synchronize();
        runs.push_back(std::chrono::duration<double>(Clock::now() - t0).count() / kPasses);
      }
      return median(runs);
    };
    return Timed{per_pass(false), per_pass(true), m.ops.size()};
  };
  const Timed small = run(2), large = run(6);
  const double ops = static_cast<double>(large.ops - small.ops);
  cost::HostOpTimes h;
  h.forward_seconds = std::max(1e-9, (large.forward - small.forward) / ops);
  h.backward_seconds =
      std::max(1e-9, ((large.both - large.forward) - (small.both - small.forward)) / ops);
  return h;
}

}  // namespace

Result<cost::CalibrationProfile> calibrate(
    const CalibrateOptions& opts, const std::function<void(const std::string&)>& progress) {
  if (opts.device != "cpu" && opts.device != "cuda")
    return Error{fmt::format("--device: expected cpu or cuda, got \"{}\"", opts.device)};
  if (opts.device == "cuda" && !torch::cuda::is_available())
    return Error{"--device: cuda: no CUDA device is available to this libtorch"};
  if (opts.sizes < 2 || opts.sizes > 10) return Error{"--sizes: expected 2 to 10"};
  if (opts.threads < 1) return Error{"--threads: expected at least 1"};
  torch::set_num_threads(opts.threads);
  detail::keep_freed_memory();
  torch::manual_seed(1);
  const torch::Device dev(opts.device == "cuda" ? torch::kCUDA : torch::kCPU);
  const auto o =
      torch::TensorOptions().device(dev).dtype(dev.is_cuda() ? torch::kBFloat16 : torch::kFloat);
  // Every probe in each of three rounds, each point the median of its rounds: a slow or fast
  // spell of the machine (seconds long on the virtual machine this was written on, where it moved
  // a 256^3 GEMM's time by 1.6x between two calibrations) falls on one round of a point.
  constexpr int kRounds = 3;
  const Timer timer(dev, opts.seconds_per_point / kRounds);
  cost::CalibrationProfile prof;
  prof.device = opts.device_type;
  prof.measured_on = opts.measured_on;
  prof.notes =
      fmt::format("hetplan calibrate --device {}: libtorch forward passes in {}, {} thread(s)",
                  opts.device, dev.is_cuda() ? "bf16" : "fp32", opts.threads);
  std::map<OpKind, std::vector<std::vector<double>>> rounds;  // per kind and size
  for (int round = 0; round < kRounds; ++round)
    for (OpKind kind : cost::kAllOpKinds) {
      auto& pts = prof.points[opts.device_type][kind];
      auto& times = rounds[kind];
      times.resize(static_cast<std::size_t>(opts.sizes));
      for (int i = 0; i < opts.sizes; ++i) {
        Probe p = probe(kind, i, opts.sizes, o);
        for (auto& t : p.inputs) t.requires_grad_(true);
        times[static_cast<std::size_t>(i)].push_back(timer.time(p) /
                                                     static_cast<double>(p.entries));
        if (round > 0) continue;
        // Filed under the forward and backward pass's work together, as the training graph
        // counts it (model/training.h): a GEMM's backward is two GEMMs of the forward's FLOPs
        // reading dY twice and X once; any other op's backward about its forward FLOPs, reading
        // dY and X.
        const bool gemm = cost::is_gemm_like(kind);
        cost::CalibrationPoint pt;
        pt.flops = p.flops * (gemm ? 3 : 2);
        pt.bytes = gemm ? 3 * (p.read + p.written) : 3 * p.read + 2 * p.written;
        pts.push_back(pt);
      }
    }
  for (OpKind kind : cost::kAllOpKinds) {
    auto& pts = prof.points[opts.device_type][kind];
    for (std::size_t i = 0; i < pts.size(); ++i) pts[i].seconds = median(rounds[kind][i]);
    if (progress)
      progress(fmt::format("{}: {} sizes, {:.3g} to {:.3g} s", model::to_string(kind), pts.size(),
                           pts.front().seconds, pts.back().seconds));
  }
  // The optimizer at 1 Ki to 4 Mi parameters (fewer sizes with fewer --sizes), also the median of
  // three rounds.
  auto& steps = prof.optimizer[opts.device_type];
  const int optimizer_sizes = std::min(opts.sizes, 7);
  std::vector<std::vector<double>> step_rounds(static_cast<std::size_t>(optimizer_sizes));
  for (int round = 0; round < kRounds; ++round)
    for (int i = 0; i < optimizer_sizes; ++i)
      step_rounds[static_cast<std::size_t>(i)].push_back(time_optimizer_step(
          std::int64_t{1024} << (2 * i), dev, opts.seconds_per_point / kRounds));
  for (int i = 0; i < optimizer_sizes; ++i)
    steps.push_back({0, static_cast<double>(std::int64_t{1024} << (2 * i)),
                     median(step_rounds[static_cast<std::size_t>(i)])});
  if (progress)
    progress(fmt::format("optimizer (Adam): {} sizes, {:.3g} to {:.3g} s", steps.size(),
                         steps.front().seconds, steps.back().seconds));
  const cost::HostOpTimes host = time_host_ops(dev, opts.seconds_per_point, kRounds);
  prof.host[opts.device_type] = host;
  if (progress)
    progress(fmt::format("host per op: {:.3g} s forward, {:.3g} s backward", host.forward_seconds,
                         host.backward_seconds));
  return prof;
}

}  // namespace hetplan::runtime
