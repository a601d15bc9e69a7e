// Calibration of the messaging between two worker processes of this host (calibrate.h).
#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "heap.h"
#include "hetplan/runtime/calibrate.h"
#include "hetplan/runtime/launch.h"
#include "process_groups.h"

namespace hetplan::runtime {

Result<bool> messaging_worker(const std::string& out_file) {
  auto env = rank_env_from_environment();
  if (!env) return env.error();
  const std::chrono::milliseconds timeout(60000);
  try {
    torch::set_num_threads(1);
    detail::keep_freed_memory();
    auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(detail::connect_store(*env, timeout),
                                                          env->rank, env->world_size,
                                                          detail::gloo_options_for(*env, timeout));
    torch::Tensor work = torch::randn({128, 128});
    // From 16 elements: a one-element all-reduce takes a shorter path through Gloo (its ring has
    // empty chunks) and ran 4 to 7 times faster than 16 elements on the machine this was written
    // on, while a training step's collectives all hold more.
    std::vector<std::vector<torch::Tensor>> tensors;
    for (std::int64_t numel = 16; numel <= (std::int64_t{1} << 20); numel *= 16)
      tensors.push_back({torch::zeros({numel}, torch::kFloat)});  // sums stay finite
    for (auto& t : tensors)
      for (int i = 0; i < 3; ++i) pg->allreduce(t)->wait();
    // As a training step calls them: between collectives the worker computes for a while (here
    // four 128^3 GEMMs, a few hundred microseconds), so a peer waiting for data has gone to sleep
    // and must be woken, which back-to-back calls do not show. The mean, not the median: on a busy
    // or virtual machine a wake-up sometimes waits for the scheduler's next tick, and a step pays
    // those calls too. The sizes take turns in rounds, so that a slow or fast spell of the machine
    // (seconds long on the one this was written on, moving the small sizes' means by 2x between
    // runs) falls on all of them.
    constexpr int kRounds = 8, kCalls = 30;
    std::vector<double> total(tensors.size(), 0.0);
    for (int round = 0; round < kRounds; ++round)
      for (std::size_t k = 0; k < tensors.size(); ++k)
        for (int i = 0; i < kCalls; ++i) {
          for (int g = 0; g < 4; ++g) work = torch::tanh(torch::matmul(work, work) * 0.01);
          const auto t0 = std::chrono::steady_clock::now();
          pg->allreduce(tensors[k])->wait();
          total[k] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        }
    nlohmann::json points = nlohmann::json::array();
    for (std::size_t k = 0; k < tensors.size(); ++k)
      points.push_back({{"bytes", 4.0 * static_cast<double>(tensors[k][0].numel())},
                        {"seconds", total[k] / (kRounds * kCalls)}});
    pg->barrier()->wait();
    if (env->rank == 0) {
      std::ofstream out(out_file);
      out << points.dump() << "\n";
      if (!out) return Error{fmt::format("cannot write {}", out_file)};
    }
  } catch (const std::exception& e) {
    return Error{fmt::format("timing all-reduces between two workers: {}", e.what())};
  }
  return true;
}

Result<std::vector<cost::MessagingPoint>> calibrate_messaging(
    const std::vector<std::string>& worker_args, const std::string& out_file) {
  std::filesystem::remove(out_file);
  auto code = launch_local_workers(2, worker_args);
  if (!code) return code.error();
  if (*code != 0)
    return Error{
        fmt::format("timing all-reduces between two workers: a worker exited with {}", *code)};
  std::vector<cost::MessagingPoint> points;
  try {
    std::ifstream in(out_file);
    const auto doc = nlohmann::json::parse(in);
    for (const auto& p : doc)
      points.push_back({p.at("bytes").get<double>(), p.at("seconds").get<double>()});
  } catch (const std::exception& e) {
    std::filesystem::remove(out_file);
    return Error{
        fmt::format("{}: the workers' all-reduce times are unreadable ({})", out_file, e.what())};
  }
  std::filesystem::remove(out_file);
  return points;
}

}  // namespace hetplan::runtime
