// hetplan run: execute a plan for real on libtorch + c10d (Gloo), on local worker processes
// (--nprocs) or as one rank of a torchrun-style job.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "commands.h"
#include "hetplan/cluster/cluster_file.h"
#include "hetplan/cluster/subcluster.h"
#include "hetplan/model/zoo.h"
#include "hetplan/plan/plan_json.h"
#include "measured_run.h"
#include "plan_args.h"
#include "replan.h"
#ifdef HETPLAN_WITH_RUNTIME
#include "hetplan/core/quantity_parse.h"
#include "hetplan/plan/export.h"
#include "hetplan/plan/gpu_precision.h"
#include "hetplan/plan/run_form.h"
#include "hetplan/runtime/emulate.h"
#include "hetplan/runtime/launch.h"
#include "hetplan/runtime/memory_check.h"
#include "hetplan/runtime/run.h"
#include "run_report.h"
#endif

namespace hetplan::cli {
namespace {

struct RunArgs {
  std::string model = "mlp:layers=2,hidden=64,in=32,out=10";
  std::string plan_file;
  std::string strategy;
  std::string cluster;
  std::string data_file;
  std::string checkpoint_dir;
  std::string resume_dir;
  std::string measured_out;
  std::string calibration_file;
  std::string grad_chunk;
  std::string grad_drop = "deadline";
  std::string grad_classes = "split";
  std::string precision = "fp32";
  bool precision_given = false;  // --precision on the command line (a plan's precision wins else)
  double loss_scale = -1;        // --loss-scale; -1: fp16's 65536, none otherwise
  std::string report_file;
  std::vector<std::string> compare;
  int checkpoint_every = 0;
  int steps = 20;
  int nprocs = 0;
  double timeout_s = 120;
  std::uint64_t seed = 1;
  double learning_rate = 1e-3;
  int threads = 1;
  std::string device = "cpu";
  bool device_given = false;  // --device on the command line
  bool model_given = false, cluster_given = false;  // --model, --cluster on the command line
  bool json = false;
  bool emulate = false;
  bool check = false;
  bool no_memory_check = false;
  bool elastic = false;
  bool ranks_by_device = false;
};

#ifdef HETPLAN_WITH_RUNTIME

// The arguments a worker started by --nprocs gets: the same run, without --nprocs.
std::vector<std::string> worker_args(const RunArgs& a) {
  std::vector<std::string> out{"run",
                               "--model",
                               a.model,
                               "--steps",
                               std::to_string(a.steps),
                               "--seed",
                               std::to_string(a.seed),
                               "--lr",
                               fmt::format("{}", a.learning_rate),
                               "--threads",
                               std::to_string(a.threads),
                               "--device",
                               a.device,
                               "--checkpoint-every",
                               std::to_string(a.checkpoint_every),
                               "--timeout",
                               fmt::format("{}", a.timeout_s)};
  auto add = [&](const char* flag, const std::string& v) {
    if (!v.empty()) out.insert(out.end(), {flag, v});
  };
  add("--plan", a.plan_file);
  add("--strategy", a.strategy);
  add("--cluster", a.cluster);
  add("--data", a.data_file);
  add("--checkpoint", a.checkpoint_dir);
  add("--resume", a.resume_dir);
  add("--measured-out", a.measured_out);
  add("--calibration", a.calibration_file);
  add("--grad-chunk", a.grad_chunk);
  add("--grad-drop", a.grad_drop);
  add("--grad-classes", a.grad_classes);
  if (a.precision_given) add("--precision", a.precision);
  if (a.loss_scale >= 0) add("--loss-scale", fmt::format("{}", a.loss_scale));
  add("--report", a.report_file);
  for (const auto& f : a.compare) add("--compare", f);
  if (a.json) out.push_back("--json");
  if (a.ranks_by_device) out.push_back("--ranks-by-device");
  out.push_back("--no-memory-check");  // the launcher checked the host for all its workers
  return out;
}

void print_result(const runtime::RunResult& r, const plan::Plan& p, bool json) {
  if (json) {
    nlohmann::ordered_json j;
    j["first_step"] = r.first_step;
    j["losses"] = r.losses;
    j["step_times_s"] = r.step_times_s;
    j["sync_times_s"] = r.sync_times_s;
    j["mean_step_time_s"] = r.mean_step_time_s;
    j["skipped_steps"] = r.skipped_steps;
    j["world_size"] = r.ranks.size();
    j["global_batch"] = p.global_batch;
    j["parameters"] = r.parameters;
    j["ranks"] = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < r.ranks.size(); ++i)
      j["ranks"].push_back({{"rank", i},
                            {"compute_s", r.ranks[i].compute_s},
                            {"comm_s", r.ranks[i].comm_s},
                            {"idle_s", r.ranks[i].idle_s},
                            {"step_peak_bytes", r.ranks[i].step_peak_bytes},
                            {"grad_dropped_fraction", r.ranks[i].grad_dropped_fraction},
                            {"grad_dropped_norm_fraction", r.ranks[i].grad_dropped_norm_fraction},
                            {"launcher_rank", r.ranks[i].launcher_rank},
                            {"local_rank", r.ranks[i].local_rank}});
    std::fputs((j.dump(2) + "\n").c_str(), stdout);
    return;
  }
  fmt::print("{:>5} {:>12} {:>12}\n", "step", "loss", "time (ms)");
  for (std::size_t s = 0; s < r.losses.size(); ++s)
    fmt::print("{:>5} {:>12.6f} {:>12.2f}\n", r.first_step + static_cast<int>(s), r.losses[s],
               1e3 * r.step_times_s[s]);
  fmt::print("\nmean step time {:.2f} ms (steps after the first two), {} parameters, {} ranks\n",
             1e3 * r.mean_step_time_s, r.parameters, r.ranks.size());
  if (r.skipped_steps > 0)
    fmt::print("{} step(s) skipped: their scaled gradients overflowed (dynamic loss scaling)\n",
               r.skipped_steps);
  fmt::print(
      "\n{:>5} {:>12} {:>12} {:>12} {:>14}   (seconds over the measured steps; the most tensor "
      "memory a step held above its start)\n",
      "rank", "compute", "comm", "idle", "step peak MiB");
  for (std::size_t i = 0; i < r.ranks.size(); ++i)
    fmt::print("{:>5} {:>12.4f} {:>12.4f} {:>12.4f} {:>14.2f}\n", i, r.ranks[i].compute_s,
               r.ranks[i].comm_s, r.ranks[i].idle_s,
               r.ranks[i].step_peak_bytes / (1024.0 * 1024.0));
  if (p.loss_bound > 0) {
    double bytes = 0, norm = 0;
    for (const auto& k : r.ranks)
      bytes += k.grad_dropped_fraction, norm += k.grad_dropped_norm_fraction;
    const auto n = static_cast<double>(std::max<std::size_t>(1, r.ranks.size()));
    fmt::print(
        "\ngradient chunks dropped (loss_bound {:g}): {:.2f}% of the gradient elements, {:.3f}% of "
        "the squared norm (per step, mean over the ranks)\n",
        p.loss_bound, 100 * bytes / n, 100 * norm / n);
  }
}

// How long --elastic searches for the plan of what is left after a worker dies.
constexpr double kElasticReplanLimitS = 30;

// Where a run in fp32 or TF32 holds more than its plan was priced for (a plan that names no
// precision is priced in the model's dtype, here 16-bit): how to run it as priced. Empty otherwise.
std::string priced_in(const model::Model& m, const plan::Plan& p, const std::string& precision) {
  const bool wide = precision == "fp32" || precision == "tf32";
  if (p.precision || !wide || model::dtype_bytes(m.dtype) != 2) return "";
  const std::string dtype = model::to_string(m.dtype);
  return fmt::format(" (the plan was priced in the model's {}: run it so with --precision {})",
                     dtype, dtype);
}

// --elastic: runs the job's workers; when one dies (killed by a signal: a lost device), plans
// for the devices left (replan_without, every planner, stage plans `--resume` continues), writes
// that plan into the checkpoint directory and starts its workers there, resuming from the newest
// whole checkpoint, until the job's steps are done. `p` is the plan as it runs (its ranks'
// devices).
int run_elastic(const RunArgs& first, const model::Model& m, const cluster::Cluster& c,
                plan::Plan p, std::unique_ptr<runtime::Emulation> emulation) {
  auto latest = [&] { return runtime::newest_checkpoint_step(first.checkpoint_dir); };
  auto start = latest();
  if (!start) return report_error(start.error().message);
  const int target = *start + first.steps;
  RunArgs a = first;
  std::vector<int> removed;
  for (;;) {
    runtime::WorkerFailure failure;
    auto code = runtime::launch_local_workers(a.nprocs, worker_args(a), emulation.get(), &failure);
    if (!code) return report_error(code.error().message);
    if (*code == 0 || !failure.signalled) return *code;
    auto done = latest();
    if (!done) return report_error(done.error().message);
    if (*done >= target) {
      std::fprintf(stderr,
                   "hetplan: --elastic: rank %d died after the last step's checkpoint (step %d): "
                   "the job's steps are done\n",
                   failure.rank, *done);
      return 0;
    }
    const std::vector<int> devices = runtime::rank_devices(p);
    const int lost = devices.at(static_cast<std::size_t>(failure.rank));
    removed.push_back(lost);
    std::fprintf(stderr,
                 "hetplan: --elastic: rank %d (device %d, %s) is gone; replanning for the %d "
                 "devices left, to resume from step %d\n",
                 failure.rank, lost, c.devices[lost].name.c_str(),
                 c.num_devices() - static_cast<int>(removed.size()), *done);
    SearchArgs search;
    search.time_limit_s = kElasticReplanLimitS;
    auto next = replan_without(m, c, removed, p, search);
    if (!next) return report_error("--elastic: " + next.error().message);
    next->cluster = c.reference_or_name();
    const std::string file = fmt::format("{}/plan-from-step-{}.json", first.checkpoint_dir, *done);
    if (!write_output_file(file, plan::to_json_text(*next))) return 2;
    p = runtime::executable_form(m, *next, static_cast<int>(plan::plan_devices(*next).size())).plan;
    a.plan_file = file;
    a.strategy.clear();
    a.nprocs = static_cast<int>(plan::plan_devices(p).size());
    a.steps = target - *done;
    std::fprintf(stderr, "hetplan: --elastic: %s: %d ranks, %zu stage(s); %d steps to go\n",
                 file.c_str(), a.nprocs, p.stages.size(), a.steps);
    if (emulation) {
      emulation.reset();  // its namespaces go before the new ones take their names
      auto e = runtime::Emulation::create(runtime::rank_limits(c, runtime::rank_devices(p)),
                                          std::to_string(::getpid()), a.seed,
                                          c.multipath() ? c.leaf_spine.spines : 1);
      if (!e) return report_error(e.error().message);
      emulation = std::move(*e);
    }
  }
}

int run_run(const RunArgs& given) {
  auto env = runtime::rank_env_from_environment();
  if (!env) return report_error(env.error().message);
  if (given.nprocs > 0 && env->world_size > 1)
    return report_error(
        "--nprocs: this process is already one rank of a job (RANK and WORLD_SIZE are set)");
  // A plan file names its model and cluster: they stand where --model or --cluster is not given
  // (and travel to the workers as given).
  RunArgs a = given;
  bool planned_model = false, planned_cluster = false;
  std::optional<Result<plan::Plan>> read;  // the plan file, read once
  if (!a.plan_file.empty() && a.strategy.empty()) {
    read = plan::read_plan_file(a.plan_file);
    if (*read) {
      planned_model = !a.model_given && !(*read)->model.empty();
      planned_cluster = !a.cluster_given && !(*read)->cluster.empty();
      if (planned_model) a.model = (*read)->model;
      if (planned_cluster) a.cluster = (*read)->cluster;
    }
  }
  auto from_plan = [&](const char* what, const std::string& error) {
    return report_error(plan_input_error(a.plan_file, what, error));
  };
  const int world = a.nprocs > 0 ? a.nprocs : env->world_size;
  auto m = model::load_model(a.model, "--model");
  if (!m)
    return planned_model ? from_plan("model", m.error().message) : report_error(m.error().message);
  const std::string cluster_spec = a.cluster.empty() ? fmt::format("cpu:{}", world) : a.cluster;
  auto c = cluster::load_cluster(cluster_spec, "--cluster");
  if (!c)
    return planned_cluster ? from_plan("cluster", c.error().message)
                           : report_error(c.error().message);
  if (!a.calibration_file.empty()) {
    // The links as simulate and plan price them with the profile, so that an uneven form left to
    // the cost model is the one they priced.
    auto prof = calibration_from_args(a.calibration_file, *c, cost::NetworkParams::defaults());
    if (!prof) return report_error(prof.error().message);
  }
  auto p = read ? prepared_plan(std::move(*read), a.plan_file, *m, a.model, *c)
                : plan_from_args(a.plan_file, a.strategy,
                                 fmt::format("dp={},gbs={}", world, 8 * world), *m, a.model, *c);
  if (!p) return report_error(p.error().message);
  // --check judges the plan at its full scale: one rank per device it uses, whatever --nprocs says.
  const int full_scale = static_cast<int>(plan::plan_devices(*p).size());
  // An op-level plan that is a stage plan in disguise (whole layers on the same devices,
  // all-reduced gradients) runs as that stage plan: the same step, though in 1F1B order rather than
  // the order the simulator gives its ops (HEFT). Every op split by batch inside a replica (HAP's
  // program for data parallelism across a replica's unlike devices) runs as one replica per
  // device: the same step. The plan file stays as written.
  {
    plan::RunForm form = runtime::executable_form(*m, *p, a.check ? full_scale : world);
    const bool tell = a.nprocs > 0 || env->world_size == 1;
    if (tell && form.stages_from_op_level > 0)
      std::fprintf(stderr,
                   "hetplan: the op-level plan keeps whole layers on the same devices: it runs "
                   "as a stage plan of %d stage(s), each device of a replicated group one "
                   "replica at its share, a split group one tensor-parallel replica\n",
                   form.stages_from_op_level);
    if (tell && form.op_level_from_stages)
      std::fprintf(stderr,
                   "hetplan: the stage runtime does not run this plan (no stage module for the "
                   "model, or a form it does not execute): it runs op by op, a group per stage on "
                   "its replicas' devices (per split of a batch program, per synchronisation), "
                   "one rank per device\n");
    else if (tell && form.plan.is_op_level())
      std::fprintf(stderr, "hetplan: the op-level plan runs op by op, one rank per device\n");
    if (tell && form.plan.is_op_level() &&
        (p->grad_priority != plan::GradPriority::none || p->multipath != plan::Multipath::ecmp))
      std::fprintf(stderr,
                   "hetplan: grad_priority=%s: the op-level runtime sends gradients in Gloo's "
                   "order (the same training step; DLCP's transport carries stage plans only)\n",
                   plan::to_string(p->grad_priority));
    else if (tell && p->multipath == plan::Multipath::spray && !(a.emulate && c->multipath()))
      std::fprintf(stderr,
                   "hetplan: multipath=spray: this run has one path between its ranks (DLCP's "
                   "transport sprays over several under --emulate of a cluster with equal "
                   "routes)\n");
    if (tell && form.zero3_batch_program)
      std::fprintf(stderr,
                   "hetplan: ZeRO-3 over single-device replicas runs as a batch program: one "
                   "replica of those devices at the replicas' batch shares, every weight sharded "
                   "over them (gathered for each use, gradients reduce-scattered)\n");
    if (tell && form.per_device_replicas)
      std::fprintf(stderr,
                   "hetplan: the plan splits every op by batch: each replica runs as one replica "
                   "per device, with batch shares in its tp_shares' ratios\n");
    *p = std::move(form.plan);
  }
  if (a.ranks_by_device && a.nprocs == 0 && env->world_size > 1) {
    // RANK counts the plan's devices node by node, as torchrun numbers the workers of one
    // torchrun per node (and export --to torchrun launches them); the runtime numbers them in
    // the plan's stage order.
    const std::vector<int> devices = plan::devices_node_by_node(*p, *c);
    if (static_cast<int>(devices.size()) != env->world_size)
      return report_error(fmt::format(
          "--ranks-by-device: the job has {} ranks (WORLD_SIZE) but the plan {} devices",
          env->world_size, devices.size()));
    const int device = devices[static_cast<std::size_t>(env->rank)];
    const std::vector<int> order = runtime::rank_devices(*p);
    env->rank = static_cast<int>(std::find(order.begin(), order.end(), device) - order.begin());
  }
  // --check without --device judges a plan for GPUs as it runs on them: with --device cuda.
  const std::set<int> used = plan::plan_devices(*p);
  const bool for_gpus = std::none_of(used.begin(), used.end(), [&](int d) {
    return c->type_of(d).architecture == cluster::Architecture::cpu;
  });
  const bool cuda = a.device == "cuda" || (a.check && !a.device_given && for_gpus);
  // The arithmetic: the plan's precision where it names one, else --precision; where neither
  // does, on GPUs the one the plan was priced in (the model's dtype, as the GPUs and the plan's
  // form allow), on CPUs fp32.
  std::string precision = a.precision;
  if (p->precision) {
    const std::string planned = plan::precision_name(*p->precision);
    if (a.precision_given && a.precision != planned)
      return report_error(fmt::format(
          "--precision {}: the plan trains in {} (its precision); leave --precision out to run "
          "it so",
          a.precision, planned));
    precision = planned;
  } else if (cuda && !a.precision_given) {
    const plan::GpuPrecision on = plan::gpu_precision(*p, *m, *c);
    precision = std::string(model::to_string(on.dtype));
    if (a.check && (on.dtype != model::DType::fp32 || !on.why.empty()))
      fmt::print(stderr, "hetplan: precision {}: {} (--precision fp32 trains in fp32)\n", precision,
                 on.why.empty()
                     ? std::string("the model's, in which the plan was priced")
                     : fmt::format("not the model's {}: {}", model::to_string(m->dtype), on.why));
  }
  // What each rank will hold: in the memory of the host that starts it, against what this host
  // has (CPU runs and GPU runs; not a plan for GPUs judged by --check without --device), and on
  // GPUs on its GPU (below).
  std::optional<std::vector<runtime::RankMemory>> memory;
  if (a.check || !a.no_memory_check) {
    auto need = runtime::rank_memory(*m, *c, *p, {cuda, *model::parse_dtype(precision)});
    if (need)
      memory = std::move(*need);
    else
      std::fprintf(stderr, "hetplan: memory pre-check skipped: %s\n", need.error().message.c_str());
  }
  const bool on_this_host = a.device == "cuda" || !cuda;
  std::optional<Bytes> available;  // read only when there is an estimate to set against it
  if (memory && on_this_host) available = runtime::host_available_memory();
  std::string precision_problem = runtime::precision_problem(*model::parse_dtype(precision), cuda);
  if (!precision_problem.empty())  // named by where the precision came from
    precision_problem = fmt::format("{}: {}",
                                    !p->precision         ? "--precision"
                                    : a.plan_file.empty() ? "--strategy"
                                                          : a.plan_file,
                                    precision_problem);
  if (!(a.loss_scale == -1 || (a.loss_scale >= 0 && a.loss_scale <= 1e38)))
    return report_error(fmt::format(
        "--loss-scale: expected an initial scale from 0 (none) to 1e38, got {:g}", a.loss_scale));
  if (a.check) {
    auto why = runtime::executable_problems(*m, *p, full_scale);
    if (!precision_problem.empty()) why.push_back(precision_problem);
    if (!why.empty()) {
      fmt::print("not runnable:\n");
      for (const std::string& reason : why) fmt::print("  {}\n", reason);
      return 1;
    }
    fmt::print("runnable: {} ranks, {}{}\n", full_scale,
               p->is_op_level()        ? "op by op"
               : p->stages.size() == 1 ? "one stage"
               : p->schedule == plan::Schedule::interleaved
                   ? fmt::format("{} pipeline stages, interleaved", p->stages.size())
                   : fmt::format("{} pipeline stages", p->stages.size()),
               cuda && a.device != "cuda" && precision == "fp16"
                   ? " (fp16: with --device cuda, on the GPUs it is planned for)"
                   : "");
    if (const auto [all, largest] = memory && on_this_host
                                        ? runtime::memory_totals(*memory, runtime::MemoryOf::host)
                                        : runtime::MemoryTotals{};
        largest) {
      fmt::print(
          "{}: about {} for the largest rank (device {}), {} for all {}; this host has {} "
          "available{}\n",
          largest->gpu ? "host memory (each rank builds the whole model here)" : "memory",
          format_bytes(largest->host()), largest->device, format_bytes(all), memory->size(),
          available ? format_bytes(*available) : std::string("unknown"),
          available && all > *available ? " (too little to start them all here)" : "");
    }
    if (cuda) {
      // What each rank would hold on its GPU, against what the cluster says that GPU has.
      const auto [all, largest] = memory
                                      ? runtime::memory_totals(*memory, runtime::MemoryOf::device)
                                      : runtime::MemoryTotals{};
      if (largest) {
        const Bytes has = c->type_of(largest->device).memory;
        fmt::print(
            "GPU memory in {}: about {} for the largest rank (device {}, which has {}): {}, the "
            "CUDA context and workspaces {}{}{}\n",
            precision, format_bytes(largest->total()), largest->device, format_bytes(has),
            runtime::trained_parts(*largest), format_bytes(largest->process),
            largest->total() > has ? "; more than it has" : "",
            largest->total() > has ? priced_in(*m, *p, precision) : "");
      }
    }
    return 0;
  }
  if (!precision_problem.empty()) return report_error(precision_problem);
  // fp16 always scales (65536 unless told); fp32 and bf16 only where --loss-scale asks.
  const double loss_scale =
      a.loss_scale >= 0 ? a.loss_scale : (precision == "fp16" ? runtime::kDefaultLossScale : 0.0);
  if (precision == "fp16" && loss_scale == 0)
    return report_error("--loss-scale 0: fp16 needs loss scaling (its small gradients vanish)");
  if (auto executable = runtime::check_executable(*m, *p, world); !executable) {
    // (A stage plan refused as it stands says too why it does not run op by op.)
    std::string why = executable.error().message;
    for (const auto& more : runtime::executable_problems(*m, *p, world))
      if (more.rfind("op by op: ", 0) == 0) why += "; " + more;
    return report_error(why);
  }
  if (!a.resume_dir.empty() &&
      !std::filesystem::exists(std::filesystem::path(a.resume_dir) / "latest"))
    return report_error(fmt::format(
        "--resume: {}: no checkpoint there (expected the directory a run's --checkpoint wrote, "
        "with its file `latest`)",
        a.resume_dir));
  if (memory && available) {
    // --nprocs starts every rank here; a torchrun rank shares its host with LOCAL_WORLD_SIZE.
    std::vector<runtime::RankMemory> here = *memory;
    Bytes share = *available;
    if (a.nprocs == 0) {
      here = {memory->at(static_cast<std::size_t>(env->rank))};
      if (const char* local = std::getenv("LOCAL_WORLD_SIZE"); local && std::atoi(local) > 1)
        share = share / std::atoi(local);
    }
    if (auto why = runtime::memory_shortfall(here, share); !why.empty()) return report_error(why);
  }
  if (a.device == "cuda" && memory) {
    // Each rank against the GPU it will run on (LOCAL_RANK's; --nprocs starts rank i on GPU i).
    for (std::size_t i = 0; i < memory->size(); ++i) {
      if (a.nprocs == 0 && static_cast<int>(i) != env->rank) continue;
      const int local = a.nprocs > 0 ? static_cast<int>(i) : env->local_rank;
      if (const auto free = runtime::gpu_free_memory(local))
        if (auto why = runtime::gpu_memory_shortfall((*memory)[i], local, *free); !why.empty())
          return report_error(why + priced_in(*m, *p, precision));
    }
  }
  if (a.steps < 1) return report_error("--steps: expected at least 1");
  if (a.checkpoint_every < 0)
    return report_error("--checkpoint-every: expected a number of steps, 0 or more");
  if (a.checkpoint_every > 0 && a.checkpoint_dir.empty())
    return report_error("--checkpoint-every: expected --checkpoint DIR too");
  if (a.elastic && (a.nprocs < 1 || a.checkpoint_dir.empty()))
    return report_error(
        "--elastic: expected --nprocs and --checkpoint DIR (the job resumes from its checkpoints "
        "after replanning)");
  if (a.elastic && a.nprocs != full_scale)
    return report_error(
        fmt::format("--elastic: expected --nprocs {} (one worker per device of the plan), got {}",
                    full_scale, a.nprocs));
  if (!(a.timeout_s > 0) || a.timeout_s > 1e6)
    return report_error("--timeout: expected seconds, more than 0");
  if (a.device != "cpu" && a.device != "cuda")
    return report_error(fmt::format("--device: expected cpu or cuda, got \"{}\"", a.device));
  if (a.emulate && a.device != "cpu")
    return report_error("--emulate: expected --device cpu (the emulation limits CPU shares)");

  std::vector<ComparedRun> compared;
  for (const auto& file : a.compare) {
    auto run = read_compared_run(file);
    if (!run) return report_error(run.error().message);
    compared.push_back(std::move(*run));
  }
  if (!a.compare.empty() && a.report_file.empty())
    return report_error("--compare: expected --report FILE too (the runs are compared there)");

  std::unique_ptr<runtime::Emulation> emulation;
  if (a.emulate) {
    if (a.nprocs < 1)
      return report_error("--emulate: expected --nprocs (the emulated ranks are local workers)");
    if (a.cluster.empty())
      return report_error("--emulate: expected --cluster (its nodes' cpu_share and NICs)");
    auto e = runtime::Emulation::create(runtime::rank_limits(*c, runtime::rank_devices(*p)),
                                        std::to_string(::getpid()), a.seed,
                                        c->multipath() ? c->leaf_spine.spines : 1);
    if (!e) return report_error(e.error().message);
    emulation = std::move(*e);
    for (const auto& note : emulation->notes())
      std::fprintf(stderr, "hetplan: --emulate: %s\n", note.c_str());
  }
  if (a.nprocs > 0 && a.elastic) return run_elastic(a, *m, *c, *p, std::move(emulation));
  if (a.nprocs > 0) {
    auto code = runtime::launch_local_workers(a.nprocs, worker_args(a), emulation.get());
    if (!code) return report_error(code.error().message);
    return *code;
  }
  runtime::RunOptions opts;
  opts.steps = a.steps;
  opts.seed = a.seed;
  opts.data_file = a.data_file;
  opts.checkpoint_dir = a.checkpoint_dir;
  opts.resume_dir = a.resume_dir;
  opts.checkpoint_every = a.checkpoint_every;
  opts.timeout_s = a.timeout_s;
  opts.learning_rate = a.learning_rate;
  opts.threads_per_rank = a.threads;
  opts.cluster = &*c;
  opts.cuda = a.device == "cuda";
  if (!a.grad_chunk.empty()) {
    const auto chunk = grad_chunk_from_arg(a.grad_chunk);
    if (!chunk) return report_error(chunk.error().message);
    opts.grad_chunk_bytes = *chunk;
  }
  opts.grad_drop_all = a.grad_drop == "always";
  opts.grad_one_class = a.grad_classes == "one";
  opts.precision = *model::parse_dtype(precision);  // one the option or the plan file accepts
  opts.loss_scale = loss_scale;
  auto r = runtime::run_plan(*m, *p, opts, *env);
  if (!r) return report_error(fmt::format("rank {}: {}", env->rank, r.error().message));
  if (env->rank != 0) return 0;
  if (!a.report_file.empty()) {
    RunReportInput in{fmt::format("hetplan run: {} on {} ranks", a.model, r->ranks.size()),
                      a.model, *p, *r, compared,
                      runtime::every_gradient_to_parameter_servers(*p)};
    if (!write_output_file(a.report_file, run_report_html(in))) return 2;
  }
  if (!a.measured_out.empty()) {
    MeasuredRun out;
    out.model = a.model;
    out.cluster = cluster_spec;
    out.plan = *p;
    // The arithmetic it ran in, also where --precision chose it: what simulate must cost.
    out.plan.precision = opts.precision;
    out.first_step = r->first_step;
    out.step_times_s = r->step_times_s;
    out.mean_step_time_s = r->mean_step_time_s;
    out.threads_per_rank = a.threads;
    const auto devices = runtime::rank_devices(*p);
    for (std::size_t k = 0; k < r->ranks.size(); ++k)
      out.ranks.push_back(MeasuredRank{static_cast<int>(k), k < devices.size() ? devices[k] : 0,
                                       r->ranks[k].compute_s, r->ranks[k].comm_s,
                                       r->ranks[k].idle_s});
    if (!write_output_file(a.measured_out, measured_run_json(out).dump(2) + "\n")) return 2;
  }
  print_result(*r, *p, a.json);
  return 0;
}

#else

int run_run(const RunArgs&) { return report_no_runtime("run"); }

#endif

}  // namespace

Action add_run_command(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  auto* cmd = app.add_subcommand(
      "run",
      "Execute a plan for real on libtorch + c10d (Gloo on CPU, NCCL on GPU) and measure it");
  auto* model = cmd->add_option("--model,-m", args->model,
                                "Model: an MLP (mlp:...), a ResNet (resnet:...) or a GPT- or "
                                "Llama-style decoder (gpt:..., llama:...) small enough for CPUs "
                                "(with --plan: the plan's `model`)")
                    ->capture_default_str();
  cmd->add_option("--plan,-p", args->plan_file, "A plan JSON file (e.g. from hetplan plan --out)");
  cmd->add_option("--strategy,-s", args->strategy,
                  "Shorthand instead of --plan (default: dp=<ranks>,gbs=<8 x ranks>)")
      ->check(strategy_not_blank);
  auto* cluster = cmd->add_option("--cluster,-c", args->cluster,
                                  "The cluster the plan is for (with --plan: the plan's `cluster`; "
                                  "default: cpu:<ranks>, this host's CPU workers)");
  cmd->add_option("--calibration", args->calibration_file,
                  "The calibration profile the plan was made with: the runtime picks uneven "
                  "collective forms left to the cost model on the links as it prices them");
  cmd->add_option("--steps", args->steps, "Training steps")->capture_default_str();
  cmd->add_option("--nprocs", args->nprocs,
                  "Start this many local worker processes (otherwise read RANK, WORLD_SIZE, "
                  "MASTER_ADDR, MASTER_PORT as torchrun sets them)");
  cmd->add_option("--data", args->data_file,
                  "A text file to train on, tokenised at byte level (default: synthetic tokens)");
  cmd->add_option("--checkpoint", args->checkpoint_dir,
                  "Keep the parameters, Adam's moments and the step in DIR, whole tensors by "
                  "name whatever the plan: resume from the newest whole step there, write them "
                  "at the end (and every --checkpoint-every steps)");
  cmd->add_flag("--elastic", args->elastic,
                "With --nprocs and --checkpoint: when a worker dies, plan for the devices left "
                "(written into DIR), and resume there from the newest checkpoint until the "
                "steps are done");
  cmd->add_option("--resume", args->resume_dir,
                  "Resume from the newest whole step of DIR (a checkpoint another run wrote, "
                  "under this plan or any other of the same model, global batch and seed) "
                  "instead of --checkpoint's");
  cmd->add_option("--measured-out", args->measured_out,
                  "Write what the run measured (step times, each rank's compute, communication "
                  "and idle time) with its model, cluster and plan as JSON, for simulate "
                  "--measured")
      ->check(writable_output);
  cmd->add_option("--checkpoint-every", args->checkpoint_every,
                  "Steps between checkpoints (0: only at the end)")
      ->capture_default_str();
  cmd->add_option("--timeout", args->timeout_s,
                  "Seconds a rank waits for a collective or a neighbour stage before it stops "
                  "and names the ranks that stopped answering")
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "Seed of initialisation and data")->capture_default_str();
  cmd->add_option("--lr", args->learning_rate, "Adam learning rate")->capture_default_str();
  cmd->add_option("--threads", args->threads, "Intra-op threads per worker")->capture_default_str();
  auto* device =
      cmd->add_option("--device", args->device,
                      "cpu (Gloo) or cuda (each rank on GPU LOCAL_RANK, NCCL; needs a build "
                      "against a CUDA-enabled libtorch). --check without it judges a plan for "
                      "GPUs as run on them")
          ->capture_default_str();
  cmd->add_option("--grad-chunk", args->grad_chunk,
                  "Gradient chunk size of DLCP's transport (plans with a grad_priority or "
                  "parameter servers), per tensor-parallel rank (default 256KiB)");
  cmd->add_option("--grad-drop", args->grad_drop,
                  "Under a loss_bound, which droppable chunks DLCP's transport skips: those not "
                  "sent by the deadline (deadline), or all of them, the bound's worst case "
                  "(always)")
      ->check(CLI::IsMember({"deadline", "always"}))
      ->capture_default_str();
  cmd->add_option("--grad-classes", args->grad_classes,
                  "DLCP's transport: the urgent first half of each step's gradient in a traffic "
                  "class above the rest (split), or every chunk that must arrive in the class of "
                  "unmarked traffic (one: what the classes give, measured)")
      ->check(CLI::IsMember({"split", "one"}))
      ->capture_default_str();
  auto* precision =
      cmd->add_option("--precision", args->precision,
                      "Arithmetic of the forward and backward passes where the plan names none "
                      "(a plan's precision wins; another --precision is an error): fp32, bf16 "
                      "mixed precision (autocast: GEMMs, convolutions and attention in bf16; "
                      "parameters, gradients, Adam's state and collectives in fp32) or fp16 "
                      "(the same, with dynamic loss scaling; --device cuda only), or tf32 (fp32 "
                      "whose CUDA matmuls run on the TF32 tensor cores; on CPUs fp32)")
          ->check(CLI::IsMember({"fp32", "bf16", "fp16", "tf32"}))
          ->capture_default_str();
  cmd->add_option("--loss-scale", args->loss_scale,
                  "Dynamic loss scaling from this initial scale: the loss is multiplied by it "
                  "before the backward pass, a step whose gradients overflow is skipped and the "
                  "scale halved, 2000 clean steps double it (default: 65536 for fp16, which needs "
                  "it; none for fp32 and bf16, where it changes nothing but the gradients' range; "
                  "0: none). Stage plans only");
  cmd->add_option("--report", args->report_file,
                  "Write an HTML report of the run to FILE: its loss curve (beside those of "
                  "--compare runs), each step's gradient synchronisation time, the ranks' times")
      ->check(writable_output);
  cmd->add_option("--compare", args->compare,
                  "A run's JSON (from run --json) whose loss curve the report draws beside this "
                  "one's (repeatable)");
  cmd->add_flag("--emulate", args->emulate,
                "Run the --nprocs workers as --cluster describes them: each in its own network "
                "namespace with its node's NIC bandwidth (tc), at its node's cpu_share of a core "
                "(cgroups); needs root");
  cmd->add_flag("--ranks-by-device", args->ranks_by_device,
                "RANK counts the plan's devices in ascending id order, node by node as torchrun "
                "numbers its workers (hetplan export --to torchrun), instead of the plan's stage "
                "order");
  cmd->add_flag("--json", args->json,
                "Print one JSON object: losses, step_times_s, mean_step_time_s, ranks");
  cmd->add_flag("--no-memory-check", args->no_memory_check,
                "Start even when the ranks' estimated memory exceeds what this host has "
                "available (the estimate: the simulator's, carried over to fp32 training)");
  cmd->add_flag("--check", args->check,
                "Only decide, without starting anything, whether the plan runs at its full scale "
                "(one rank per device it uses): print \"runnable\" (exit 0) or \"not runnable\" "
                "and the reason (exit 1)");
  return [args, precision, device, model, cluster] {
    args->precision_given = precision->count() > 0;
    args->device_given = device->count() > 0;
    args->model_given = model->count() > 0;
    args->cluster_given = cluster->count() > 0;
    return run_run(*args);
  };
}

}  // namespace hetplan::cli
