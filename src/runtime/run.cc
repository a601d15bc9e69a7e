#include "hetplan/runtime/run.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "batches.h"
#include "torch_modules.h"

namespace hetplan::runtime {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Samples of the global batch per rank (replica order), from the plan's batch shares.
std::vector<std::int64_t> rank_samples(const plan::Plan& p) {
  std::vector<std::int64_t> out;
  for (const auto& r : p.stages[0].replicas)
    out.push_back(std::llround(r.batch_share * static_cast<double>(p.global_batch)));
  return out;
}

c10::intrusive_ptr<c10d::ProcessGroup> connect(const RankEnv& env) {
  c10d::TCPStoreOptions so;
  so.port = static_cast<std::uint16_t>(env.master_port);
  so.isServer = env.rank == 0;
  so.numWorkers = env.world_size;
  so.waitWorkers = true;
  so.timeout = std::chrono::seconds(120);
  auto store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, so);
  auto opts = c10d::ProcessGroupGloo::Options::create();
  opts->timeout = std::chrono::seconds(120);
  const bool local = env.master_addr == "127.0.0.1" || env.master_addr == "localhost";
  opts->devices.push_back(local ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                : c10d::ProcessGroupGloo::createDefaultDevice());
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, env.rank, env.world_size, opts);
}

}  // namespace

Result<bool> check_executable(const model::Model& m, const plan::Plan& p, int world_size) {
  if (m.family != model::Family::mlp && m.family != model::Family::decoder_lm)
    return Error{fmt::format(
        "--model: {}: the runtime executes MLPs and GPT-style decoder language models; a {} model "
        "is not executed yet",
        m.name, model::to_string(m.family))};
  if (p.stages.size() != 1)
    return Error{fmt::format(
        "plan: stages: the runtime executes one stage; pipelines ({} stages) are not executed yet",
        p.stages.size())};
  const auto& replicas = p.stages[0].replicas;
  for (std::size_t r = 0; r < replicas.size(); ++r)
    if (replicas[r].devices.size() != 1)
      return Error{fmt::format(
          "plan: stages[0].replicas[{}].devices: the runtime executes one device per replica; "
          "tensor parallelism ({} devices) is not executed yet",
          r, replicas[r].devices.size())};
  if (static_cast<int>(replicas.size()) != world_size)
    return Error{fmt::format(
        "plan: stages[0].replicas: the plan has {} replicas (one rank each) but the job has {} "
        "ranks",
        replicas.size(), world_size)};
  if (p.zero_stage > 1)
    return Error{fmt::format(
        "plan: zero_stage: ZeRO stage {} is not executed yet (stage 1, sharded optimizer states, "
        "is)",
        p.zero_stage)};
  if (p.recompute != cost::Recompute::none)
    return Error{fmt::format("plan: recompute: recomputation ({}) is not executed yet",
                             plan::recompute_name(p.recompute))};
  for (std::size_t i = 0; i < p.grad_sync.size(); ++i)
    if (p.grad_sync[i].method != plan::SyncMethod::all_reduce)
      return Error{fmt::format(
          "plan: grad_sync[{}].method: {} is not executed yet (the runtime all-reduces gradients)",
          i, plan::to_string(p.grad_sync[i].method))};
  std::int64_t total = 0;
  for (std::size_t r = 0; r < replicas.size(); ++r) {
    const double samples = replicas[r].batch_share * static_cast<double>(p.global_batch);
    if (std::abs(samples - std::round(samples)) > 1e-6)
      return Error{fmt::format(
          "plan: stages[0].replicas[{}].batch_share: expected a whole number of the {} samples, "
          "got {}",
          r, p.global_batch, samples)};
    total += std::llround(samples);
  }
  if (total != p.global_batch)
    return Error{fmt::format("plan: batch shares: expected {} samples in all, got {}",
                             p.global_batch, total)};
  return true;
}

Result<RunResult> run_plan(const model::Model& m, const plan::Plan& p, const RunOptions& opts,
                           const RankEnv& env) {
  auto ok = check_executable(m, p, env.world_size);
  if (!ok) return ok.error();
  torch::set_num_threads(std::max(1, opts.threads_per_rank));
  torch::manual_seed(opts.seed);
  auto module = detail::build_module(m);
  if (!module) return module.error();
  auto& mod = **module;
  auto data = detail::BatchSource::create(m, opts.seed, opts.data_file);
  if (!data) return data.error();

  c10::intrusive_ptr<c10d::ProcessGroup> pg;
  if (env.world_size > 1) {
    try {
      pg = connect(env);
    } catch (const std::exception& e) {
      return Error{fmt::format("rank {}: cannot join the job at {}:{}: {}", env.rank,
                               env.master_addr, env.master_port, e.what())};
    }
  }

  const auto samples = rank_samples(p);
  std::int64_t offset = 0;
  for (int r = 0; r < env.rank; ++r) offset += samples[r];
  const std::int64_t mine = samples[env.rank];
  const double B = static_cast<double>(p.global_batch);
  const int M = std::max(1, p.num_microbatches);
  std::vector<torch::Tensor> params = mod.parameters();
  std::int64_t numel = 0;
  for (const auto& t : params) numel += t.numel();
  // ZeRO-1: rank r keeps Adam's states for slice r of the flattened parameters only (Adam is
  // elementwise, so the sharded step equals the whole one), and the updated slices are gathered.
  const bool zero = p.zero_stage == 1 && env.world_size > 1;
  const std::int64_t shard = (numel + env.world_size - 1) / env.world_size;
  const std::int64_t shard_begin = std::min(numel, shard * env.rank);
  const std::int64_t shard_end = std::min(numel, shard_begin + shard);
  torch::Tensor owned;  // ZeRO-1: this rank's slice of the parameters, which Adam updates
  if (zero) {
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> flat;
    for (const auto& t : params) flat.push_back(t.reshape({-1}));
    owned = torch::cat(flat).slice(0, shard_begin, shard_end).clone();
  }
  torch::optim::Adam adam(zero ? std::vector<torch::Tensor>{owned} : params,
                          torch::optim::AdamOptions(opts.learning_rate));

  RunResult res;
  res.parameters = numel;
  RankTimes own;
  const int skip = opts.steps > 2 ? 2 : 0;
  for (int step = 0; step < opts.steps; ++step) {
    const auto start = Clock::now();
    const detail::Batch batch = data->global(step, p.global_batch).slice(offset, offset + mine);
    for (auto& t : params)
      if (t.grad().defined()) t.mutable_grad().zero_();
    // Gradient accumulation over the plan's micro-batches; each loss is weighted by 1/B so that
    // the summed gradients over all ranks are the full batch's mean gradient.
    double loss_sum = 0;
    for (int mb = 0; mb < M; ++mb) {
      const std::int64_t b0 = mine * mb / M, b1 = mine * (mb + 1) / M;
      if (b1 <= b0) continue;
      auto loss = mod.loss_sum(batch.slice(b0, b1)) / B;
      loss.backward();
      loss_sum += loss.item<double>();
    }
    double compute = seconds_since(start);
    const auto comm_start = Clock::now();
    std::vector<torch::Tensor> flat_parts;
    for (auto& t : params) {
      if (!t.grad().defined()) t.mutable_grad() = torch::zeros_like(t);
      flat_parts.push_back(t.grad().reshape({-1}));
    }
    flat_parts.push_back(torch::full({1}, loss_sum, torch::kFloat));
    std::vector<torch::Tensor> flat{torch::cat(flat_parts)};
    if (pg) pg->allreduce(flat)->wait();
    const double loss = flat[0][numel].item<double>();
    double comm = seconds_since(comm_start);
    const auto opt_start = Clock::now();
    if (zero) {
      owned.mutable_grad() = flat[0].slice(0, shard_begin, shard_end).clone();
      adam.step();
      compute += seconds_since(opt_start);
      // Gather the updated slices (padded to one size, as Gloo's all-gather needs).
      const auto gather_start = Clock::now();
      std::vector<std::vector<torch::Tensor>> out(1);
      for (int r = 0; r < env.world_size; ++r) out[0].push_back(torch::empty({shard}));
      std::vector<torch::Tensor> in{torch::zeros({shard})};
      in[0].slice(0, 0, shard_end - shard_begin).copy_(owned.detach());
      pg->allgather(out, in)->wait();
      const torch::Tensor all = torch::cat(out[0]);
      torch::NoGradGuard no_grad;
      std::int64_t at = 0;
      for (auto& t : params) {
        t.copy_(all.slice(0, at, at + t.numel()).view_as(t));
        at += t.numel();
      }
      comm += seconds_since(gather_start);
    } else {
      std::int64_t at = 0;
      for (auto& t : params) {
        t.mutable_grad().copy_(flat[0].slice(0, at, at + t.numel()).view_as(t));
        at += t.numel();
      }
      adam.step();
      compute += seconds_since(opt_start);
    }
    const double step_time = seconds_since(start);
    res.losses.push_back(loss);
    res.step_times_s.push_back(step_time);
    if (step >= skip) {
      own.compute_s += compute;
      own.comm_s += comm;
      own.idle_s += std::max(0.0, step_time - compute - comm);
    }
  }
  double measured = 0;
  for (int s = skip; s < opts.steps; ++s) measured += res.step_times_s[s];
  res.mean_step_time_s = opts.steps > skip ? measured / (opts.steps - skip) : 0;
  // Every rank's times, to rank 0 (each fills its own slot of a summed buffer).
  std::vector<torch::Tensor> times{torch::zeros({env.world_size * 3}, torch::kDouble)};
  times[0][env.rank * 3] = own.compute_s;
  times[0][env.rank * 3 + 1] = own.comm_s;
  times[0][env.rank * 3 + 2] = own.idle_s;
  if (pg) pg->allreduce(times)->wait();
  for (int r = 0; r < env.world_size; ++r)
    res.ranks.push_back(RankTimes{times[0][r * 3].item<double>(),
                                  times[0][r * 3 + 1].item<double>(),
                                  times[0][r * 3 + 2].item<double>()});
  return res;
}

}  // namespace hetplan::runtime
