// hetplan simulate: predict iteration time, throughput and per-device memory of one plan.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "commands.h"
#include "hetplan/cluster/cluster_file.h"
#include "hetplan/core/quantity_parse.h"
#include "hetplan/cost/compute_cost.h"
#include "hetplan/model/zoo.h"
#include "hetplan/plan/validate.h"
#include "hetplan/sim/chrome_trace.h"
#include "hetplan/sim/simulate.h"
#include "measured_run.h"
#include "plan_args.h"
#include "reports.h"
#include "result_json.h"

namespace hetplan::cli {
namespace {

struct SimulateArgs {
  std::string model = "gpt3-1.3b";
  std::string cluster = "dgx-a100:2";
  std::string strategy;
  std::string plan_file;
  std::string trace_file;
  std::string calibration_file;
  std::string measured_file;
  std::string grad_chunk;
  int host_cores = 0;
  bool json = false;
  bool model_given = false, cluster_given = false;  // on the command line (else the defaults)
};

constexpr const char* kDefaultStrategy = "tp=2,pp=2,mbs=2,gbs=512,recompute=selective";

void progress(const char* what) {
  if (isatty(fileno(stderr))) std::fprintf(stderr, "hetplan: %s...\n", what);
}

// The used device with the largest peak memory (the first of equals), or null.
const sim::DeviceStats* fullest_device(const sim::SimResult& r) {
  const sim::DeviceStats* best = nullptr;
  for (const auto& d : r.devices)
    if (d.lane >= 0 && (!best || d.peak_memory > best->peak_memory)) best = &d;
  return best;
}

void print_summary(const model::Model& m, const cluster::Cluster& c, const plan::Plan& p,
                   const sim::SimResult& r) {
  fmt::print("model      {} ({:.3g}B parameters)\n", m.name,
             static_cast<double>(m.parameters()) / 1e9);
  fmt::print("cluster    {} ({} devices, {} used)\n", c.name, c.num_devices(), r.devices_used);
  for (const auto& alias : c.type_aliases)
    fmt::print("           '{}' is taken to be {}\n", alias.written, alias.canonical);
  if (p.is_op_level())
    fmt::print("plan       {} | {}, global batch {}\n", p.planner, plan_label(p), p.global_batch);
  else
    fmt::print(
        "plan       {} | {} stages, {} micro-batches, global batch {}, schedule {}, recompute {}, "
        "zero {}\n",
        p.planner, p.stages.size(), p.num_microbatches, p.global_batch, plan::to_string(p.schedule),
        cost::to_string(p.recompute), p.zero_stage);
  fmt::print("iteration  {}\n", format_duration(r.iteration_time));
  fmt::print("throughput {:.1f} samples/s", r.samples_per_s);
  if (r.tokens_per_s > 0) fmt::print(", {:.0f} tokens/s", r.tokens_per_s);
  fmt::print("\ncompute    {:.1f} TFLOP/s per device, MFU {:.1f}%\n", r.tflops_per_device,
             100 * r.mfu);
  fmt::print("memory     max peak {} per device: {}\n", format_bytes(r.max_peak_memory),
             r.fits ? "fits" : "DOES NOT FIT");
  if (const sim::DeviceStats* peak = fullest_device(r)) {
    const cost::MemoryBreakdown& b = peak->memory;
    fmt::print(
        "           device {}: parameters {}, gradients {}, optimizer {}, activations {}, "
        "transient {}, buffers {}, reserve {}, fragmentation {}\n",
        peak->device, format_bytes(b.parameters), format_bytes(b.gradients),
        format_bytes(b.optimizer), format_bytes(b.activations), format_bytes(b.transient),
        format_bytes(b.buffers), format_bytes(b.reserve), format_bytes(b.fragmentation));
  }
  if (const std::string samples = samples_by_device_type_text(p, c); !samples.empty())
    fmt::print("samples    {} (of {} per iteration)\n", samples, p.global_batch);
  fmt::print("price      {}\n", price_text(c, r));
  if (const std::string transport = gradient_transport_text(p, r); !transport.empty())
    fmt::print("gradients  {}\n", transport);
  fmt::print("\n{:<28} {:>10} {:>10} {:>10} {:>12} {:>12}\n", "lane", "compute", "comm", "idle",
             "peak mem", "capacity");
  for (const auto& lane : r.lanes) {
    const auto& d = r.devices[lane.devices.front()];
    fmt::print("{:<28} {:>10} {:>10} {:>10} {:>12} {:>12}{}\n", lane.name,
               format_duration(d.compute_busy), format_duration(d.comm_busy),
               format_duration(d.idle), format_bytes(d.peak_memory), format_bytes(d.capacity),
               d.fits ? "" : "  OOM");
  }
}

// A plan that does not fit, changed as little as makes it fit: the largest micro-batch (most
// micro-batch rounds of the global batch) that fits under the plan's own recomputation and ZeRO
// stage, else the first recomputation and ZeRO setting (each step from the plan's own towards
// full recomputation and ZeRO-3, ZeRO first) under which some micro-batch fits. Judged by the
// simulator; the search gives up after kFitSearchSeconds.
struct WouldFit {
  plan::Plan plan;
  std::string change;  // "mbs=2 (32 micro-batch rounds), recompute selective"
  Bytes peak;
};

constexpr double kFitSearchSeconds = 20;

// Whether every replica gets a whole number of samples, one or more, of a micro-batch round of
// `samples`.
bool whole_samples(const plan::Plan& p, std::int64_t samples) {
  for (const auto& st : p.stages)
    for (const auto& r : st.replicas) {
      const double n = r.batch_share * static_cast<double>(samples);
      if (n < 1 - 1e-9 || std::abs(n - std::round(n)) > 1e-6) return false;
    }
  return true;
}

std::optional<WouldFit> what_would_fit(const model::Model& m, const cluster::Cluster& c,
                                       const plan::Plan& p, const sim::SimOptions& opts) {
  if (p.is_op_level()) return std::nullopt;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::pair<int, int>> settings;  // (recompute, ZeRO stage), nearest first
  const int r0 = static_cast<int>(p.recompute), z0 = p.zero_stage;
  for (int steps = 0; steps <= (2 - r0) + (3 - z0); ++steps)
    for (int r = r0; r <= 2; ++r)
      if (const int z = z0 + steps - (r - r0); z >= z0 && z <= 3) settings.emplace_back(r, z);
  for (const auto& [r, z] : settings)
    for (std::int64_t rounds = p.num_microbatches; rounds <= p.global_batch; ++rounds) {
      if (p.global_batch % rounds != 0 || !whole_samples(p, p.global_batch / rounds)) continue;
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >
          kFitSearchSeconds)
        return std::nullopt;
      plan::Plan q = p;
      q.recompute = static_cast<cost::Recompute>(r);
      q.zero_stage = z;
      q.num_microbatches = static_cast<int>(rounds);
      if (!plan::validate_plan(q, m, c, "").ok()) continue;
      auto result = sim::simulate(m, c, q, opts);
      if (!result || !result->fits) continue;
      // Samples per replica per micro-batch, as a strategy's mbs counts them (the first stage's
      // replicas; uneven shares round).
      const double mbs = static_cast<double>(p.global_batch) / static_cast<double>(rounds) /
                         static_cast<double>(p.stages.front().replicas.size());
      std::string change = fmt::format("mbs={:g} ({} micro-batch rounds)", mbs, rounds);
      if (q.recompute != p.recompute)
        change += fmt::format(", recompute {}", cost::to_string(q.recompute));
      if (q.zero_stage != p.zero_stage) change += fmt::format(", zero {}", q.zero_stage);
      return WouldFit{std::move(q), change, result->max_peak_memory};
    }
  return std::nullopt;
}

// A plan file names its model and cluster: simulate uses them where --model or --cluster is not
// given, and refuses one that is given and names another (a plan's device ids and layer counts
// mean nothing on another model or cluster).
int run_simulate(SimulateArgs a) {
  progress("loading model and cluster");
  std::optional<PlanWithInputs> in;
  if (!a.plan_file.empty()) {
    if (!a.strategy.empty())
      return report_error("--strategy and --plan: expected one of them, not both");
    auto read =
        read_plan_with_inputs(a.plan_file, {a.model, a.cluster, a.model_given, a.cluster_given});
    if (!read) return report_error(read.error().message);
    in = std::move(*read);
  } else {
    auto m = model::load_model(a.model, "--model");
    if (!m) return report_error(m.error().message);
    auto c = cluster::load_cluster(a.cluster, "--cluster");
    if (!c) return report_error(c.error().message);
    auto p = plan_from_args("", a.strategy, kDefaultStrategy, *m, a.model, *c);
    if (!p) return report_error(p.error().message);
    in = PlanWithInputs{std::move(*p), std::move(*m), std::move(*c), a.model, a.cluster};
  }
  const model::Model& m = in->model;
  cluster::Cluster& c = in->cluster;
  const plan::Plan& p = in->plan;
  sim::SimOptions opts;
  opts.host_cores = a.host_cores;
  if (!a.grad_chunk.empty()) {
    const auto chunk = grad_chunk_from_arg(a.grad_chunk);
    if (!chunk) return report_error(chunk.error().message);
    opts.grad_chunk_bytes = *chunk;
  }
  if (!a.calibration_file.empty()) {
    auto prof = calibration_from_args(a.calibration_file, c, opts.network);
    if (!prof) return report_error(prof.error().message);
    opts.profile = std::move(*prof);
  }
  std::optional<MeasuredRun> measured;
  if (!a.measured_file.empty()) {
    auto mr = read_measured_run(a.measured_file);
    if (!mr) return report_error(mr.error().message);
    measured = std::move(*mr);
  }
  opts.record_events = !a.trace_file.empty();
  progress("simulating");
  auto r = sim::simulate(m, c, p, opts);
  if (!r) return report_error(r.error().message);
  if (!a.trace_file.empty() && !write_output_file(a.trace_file, sim::chrome_trace_json(*r)))
    return 2;
  // Against a measured run: the relative error of the predicted iteration time.
  const double predicted = r->iteration_time.value;
  const double error =
      measured ? (predicted - measured->mean_step_time_s) / measured->mean_step_time_s : 0;
  if (a.json) {
    auto j = sim_result_json(m, c, p, *r);
    if (measured)
      j["measured"] = {{"file", a.measured_file},
                       {"iteration_time_s", measured->mean_step_time_s},
                       {"error", error}};
    std::fputs((j.dump(2) + "\n").c_str(), stdout);
  } else {
    print_summary(m, c, p, *r);
    if (measured)
      fmt::print("\nmeasured   {} per step ({}: {} on {}); predicted {}: {:+.1f}%\n",
                 format_duration(Seconds(measured->mean_step_time_s)), a.measured_file,
                 measured->model, measured->cluster, format_duration(r->iteration_time),
                 100 * error);
  }
  if (r->fits) return 0;
  // Out of memory: exit 1, saying what would fit.
  progress("looking for a micro-batch, recomputation or ZeRO setting that fits");
  const auto fit = what_would_fit(m, c, p, opts);
  if (fit)
    std::fprintf(stderr,
                 "hetplan: the plan does not fit in its devices' memory (peak %s); it fits with "
                 "%s (peak %s)\n",
                 format_bytes(r->max_peak_memory).c_str(), fit->change.c_str(),
                 format_bytes(fit->peak).c_str());
  else
    std::fprintf(
        stderr, "hetplan: the plan does not fit in its devices' memory (peak %s), and %s\n",
        format_bytes(r->max_peak_memory).c_str(),
        p.is_op_level() ? "op-level plans get no suggestion (try hetplan plan)"
                        : "no micro-batch fits with any recomputation and ZeRO setting (more "
                          "devices or another layout: try hetplan plan)");
  return 1;
}

}  // namespace

Action add_simulate_command(CLI::App& app) {
  auto args = std::make_shared<SimulateArgs>();
  auto* cmd =
      app.add_subcommand("simulate", "Predict iteration time, throughput and memory of a plan");
  auto* model = cmd->add_option("--model,-m", args->model,
                                "Model: preset name, family spec (gpt:layers=..) or graph .json "
                                "(with --plan: the plan's `model`)")
                    ->capture_default_str();
  auto* cluster = cmd->add_option("--cluster,-c", args->cluster,
                                  "Cluster: preset name (dgx-a100:4) or YAML file (with --plan: "
                                  "the plan's `cluster`)")
                      ->capture_default_str();
  cmd->add_option(
         "--strategy,-s", args->strategy,
         std::string(
             "Megatron-style shorthand, e.g. dp=8,tp=8,pp=12,mbs=1,gbs=1536,recompute=full,"
             "zero=1,schedule=interleaved,vpp=3,sp=1; bn=synced: batch-norm statistics over "
             "each whole micro-batch (default: ") +
             kDefaultStrategy + ")")
      ->check(strategy_not_blank);
  cmd->add_option("--plan,-p", args->plan_file, "A plan JSON file (instead of --strategy)");
  cmd->add_option("--trace", args->trace_file,
                  "Write a Chrome trace (Perfetto) of the iteration to FILE")
      ->check(writable_output);
  cmd->add_option("--calibration", args->calibration_file, "A measured calibration profile (JSON)");
  cmd->add_option("--measured", args->measured_file,
                  "A run's measurements (hetplan run --measured-out): prints the predicted "
                  "iteration time's error against its mean step time");
  cmd->add_option("--grad-chunk", args->grad_chunk,
                  "Gradient chunk size for plans with a grad_priority (DLCP), per "
                  "tensor-parallel rank (default 256KiB)");
  cmd->add_option("--host-cores", args->host_cores,
                  "The cores of the machine on which `hetplan run` runs the CPU workers (with "
                  "--emulate, those of nodes with a cpu_share too): they share them when more "
                  "compute at once (default 0: a core each)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--json", args->json, "Print one JSON object instead of the summary");
  return [args, model, cluster] {
    args->model_given = model->count() > 0;
    args->cluster_given = cluster->count() > 0;
    return run_simulate(*args);
  };
}

}  // namespace hetplan::cli
