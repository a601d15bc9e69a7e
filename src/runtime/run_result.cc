#include "run_result.h"

#include <torch/torch.h>

namespace hetplan::runtime::detail {

void finish_run(RunResult& res, const std::vector<double>& own_losses, const RankTimes& own,
                int steps, int skip, Collectives* world, const RankEnv& env,
                const c10::Device& dev) {
  const auto on_dev = torch::TensorOptions().device(dev).dtype(torch::kDouble);
  std::vector<torch::Tensor> losses{torch::tensor(own_losses, on_dev)};
  if (world && !own_losses.empty()) world->allreduce(losses)->wait();
  losses[0] = losses[0].cpu();
  for (std::size_t s = 0; s < own_losses.size(); ++s)
    res.losses.push_back(losses[0][static_cast<std::int64_t>(s)].item<double>());
  double measured = 0;
  for (int s = skip; s < steps; ++s) measured += res.step_times_s[static_cast<std::size_t>(s)];
  res.mean_step_time_s = steps > skip ? measured / (steps - skip) : 0;
  constexpr int kFields = 8;
  torch::Tensor own_times = torch::zeros({env.world_size * kFields}, torch::kDouble);
  own_times[env.rank * kFields] = own.compute_s;
  own_times[env.rank * kFields + 1] = own.comm_s;
  own_times[env.rank * kFields + 2] = own.idle_s;
  own_times[env.rank * kFields + 3] = own.step_peak_bytes;
  own_times[env.rank * kFields + 4] = own.grad_dropped_fraction;
  own_times[env.rank * kFields + 5] = own.grad_dropped_norm_fraction;
  own_times[env.rank * kFields + 6] = env.launcher_rank;
  own_times[env.rank * kFields + 7] = env.local_rank;
  std::vector<torch::Tensor> times{own_times.to(dev)};
  if (world) world->allreduce(times)->wait();
  times[0] = times[0].cpu();
  for (int r = 0; r < env.world_size; ++r) {
    auto at = [&](int f) { return times[0][r * kFields + f].item<double>(); };
    res.ranks.push_back(RankTimes{at(0), at(1), at(2), at(3), at(4), at(5), static_cast<int>(at(6)),
                                  static_cast<int>(at(7))});
  }
}

}  // namespace hetplan::runtime::detail
