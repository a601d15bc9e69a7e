#include "lowering_common.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <unordered_map>

namespace hetplan::sim::detail {

std::string lane_name(int lane, const std::vector<int>& devices) {
  if (devices.size() == 1) return fmt::format("lane {} (device {})", lane, devices[0]);
  bool consecutive = true;
  for (std::size_t i = 1; i < devices.size(); ++i) consecutive &= devices[i] == devices[i - 1] + 1;
  if (consecutive)
    return fmt::format("lane {} (devices {}-{})", lane, devices.front(), devices.back());
  return fmt::format("lane {} ({} devices from {})", lane, devices.size(), devices.front());
}

double between_steps_time(const cost::ComputeCostModel& compute, const cluster::Cluster& c,
                          const std::vector<LaneInfo>& lanes) {
  double out = 0;
  for (const LaneInfo& lane : lanes)
    for (int d : lane.devices) out = std::max(out, compute.iteration_host_time(c.type_of(d)).value);
  return out;
}

TransferLanes transfer_lanes(const TaskGraph& g, const cluster::Cluster& c,
                             const std::vector<LaneInfo>& lanes) {
  std::vector<int> lane_of_device(c.devices.size(), -1);
  for (std::size_t l = 0; l < lanes.size(); ++l)
    for (int d : lanes[l].devices) lane_of_device[d] = static_cast<int>(l);
  TransferLanes out;
  out.list_of.assign(g.tasks.size(), -1);
  std::unordered_map<std::int64_t, int> list_of_loads;  // (loads_begin, loads_end) -> list
  for (std::size_t t = 0; t < g.tasks.size(); ++t) {
    const Task& task = g.tasks[t];
    if (!task.is_transfer) continue;
    auto [it, fresh] = list_of_loads.try_emplace(
        (static_cast<std::int64_t>(task.loads_begin) << 32) | task.loads_end,
        static_cast<int>(out.lists.size()));
    out.list_of[t] = it->second;
    if (!fresh) continue;
    auto& ends = out.lists.emplace_back();
    for (int i = task.loads_begin; i < task.loads_end; ++i) {
      const cluster::Link& link = c.links[g.loads[i].link];
      for (int v : {link.from, link.to})
        if (v < c.num_devices() && lane_of_device[v] >= 0) ends.push_back(lane_of_device[v]);
    }
    std::sort(ends.begin(), ends.end());
    ends.erase(std::unique(ends.begin(), ends.end()), ends.end());
  }
  return out;
}

namespace {

using Span = std::pair<double, double>;

// Sorts spans by start (a stream's tasks come in their order, so mostly they are sorted already).
void sort_spans(std::vector<Span>& iv) {
  if (!std::is_sorted(iv.begin(), iv.end())) std::sort(iv.begin(), iv.end());
}

// The length of the union of the intervals, sorted.
double covered(const std::vector<Span>& iv) {
  double total = 0, cur_s = 0, cur_e = -1;
  for (auto [s, e] : iv) {
    if (s > cur_e) {
      total += std::max(0.0, cur_e - cur_s);
      cur_s = s;
      cur_e = e;
    } else {
      cur_e = std::max(cur_e, e);
    }
  }
  return total + std::max(0.0, cur_e - cur_s);
}

}  // namespace

std::vector<BusyTimes> busy_times(const TaskGraph& g, const std::vector<LaneInfo>& lanes,
                                  const TransferLanes& transfer_lanes, const EngineResult& eng,
                                  int num_devices) {
  std::vector<std::vector<Span>> compute(lanes.size()), comm(lanes.size());
  std::vector<int> ends;
  for (std::size_t t = 0; t < g.tasks.size(); ++t) {
    const Task& task = g.tasks[t];
    const Span span{eng.start[t], eng.end[t]};
    if (!task.is_transfer) {
      compute[task.lane].push_back(span);
      continue;
    }
    const auto listed = transfer_lanes[t];
    ends.assign(listed.begin(), listed.end());
    ends.push_back(task.lane);
    if (task.peer_lane >= 0) ends.push_back(task.peer_lane);
    std::sort(ends.begin(), ends.end());
    ends.erase(std::unique(ends.begin(), ends.end()), ends.end());
    for (int l : ends) comm[l].push_back(span);
  }
  std::vector<BusyTimes> out(static_cast<std::size_t>(num_devices));
  std::vector<Span> either;
  for (std::size_t l = 0; l < lanes.size(); ++l) {
    sort_spans(compute[l]);
    sort_spans(comm[l]);
    BusyTimes b;
    b.compute = covered(compute[l]);
    b.comm = covered(comm[l]);
    either.clear();
    std::merge(compute[l].begin(), compute[l].end(), comm[l].begin(), comm[l].end(),
               std::back_inserter(either));
    b.either = covered(either);
    for (int d : lanes[l].devices) out[d] = b;
  }
  return out;
}

IterationRuns run_iterations(const TaskGraph& g, const std::vector<double>& link_capacity,
                             const std::vector<LaneInfo>& lanes, const TransferLanes& ends,
                             int num_devices) {
  IterationRuns out;
  EngineCarry carry;
  // Budgets carry from one iteration to the next (unlimited quotas have none).
  const bool budgets =
      std::any_of(g.quotas.begin(), g.quotas.end(), [](const CpuQuota& q) { return !q.unlimited; });
  EngineCarry* carried = budgets ? &carry : nullptr;
  auto next = [&] {
    out.last = run_engine(g, link_capacity, carried);
    out.events += out.last.events;
  };
  next();
  out.iteration_time = out.last.makespan;
  if (out.last.deadlock) return out;
  if (!carried) {
    out.busy = busy_times(g, lanes, ends, out.last, num_devices);
    return out;
  }
  const double period = cluster::kCpuQuotaPeriod.value;
  const long long cap =
      std::max<long long>(3, 1'000'000 / static_cast<long long>(g.tasks.size() + 1));
  double warm = out.last.makespan;
  while (warm < period && out.last.makespan > 0) {
    next();
    warm += out.last.makespan;
  }
  double window = 0;
  out.measured = 0;
  out.busy.assign(static_cast<std::size_t>(num_devices), BusyTimes{});
  while (out.measured < 3 || (window < 30 * period && out.measured < cap)) {
    next();
    window += out.last.makespan;
    const auto b = busy_times(g, lanes, ends, out.last, num_devices);
    for (std::size_t d = 0; d < out.busy.size(); ++d) {
      out.busy[d].compute += b[d].compute;
      out.busy[d].comm += b[d].comm;
      out.busy[d].either += b[d].either;
    }
    ++out.measured;
  }
  out.iteration_time = window / static_cast<double>(out.measured);
  return out;
}

void summarise(const model::Model& m, const cluster::Cluster& c, const plan::Plan& p,
               SimResult& r) {
  const double B = static_cast<double>(p.global_batch);
  const double T = r.iteration_time.value;
  r.samples_per_s = T > 0 ? B / T : 0;
  if (m.is_language_model()) r.tokens_per_s = r.samples_per_s * m.seq_len;
  // Model FLOPs: forward + backward (2x forward), plus the recomputed forward passes as Megatron-LM
  // counts them.
  const double fwd = m.forward_flops_per_sample();
  double recomputed = 0;
  for (const auto& op : m.ops)
    if (cost::recomputes(p.recompute, m, op)) recomputed += op.flops;
  r.model_flops = B * (3 * fwd + recomputed);
  double peak_sum = 0;
  r.devices_used = 0;
  for (auto& ds : r.devices) {
    if (ds.lane < 0) continue;
    ++r.devices_used;
    r.max_peak_memory = Bytes(std::max(r.max_peak_memory.value, ds.peak_memory.value));
    r.fits = r.fits && ds.fits;
    peak_sum += c.type_of(ds.device).peak(m.dtype).value;
  }
  if (T > 0 && r.devices_used > 0) {
    r.tflops_per_device = r.model_flops / T / r.devices_used / 1e12;
    r.mfu = B * 3 * fwd / (T * peak_sum);
  }
}

}  // namespace hetplan::sim::detail
