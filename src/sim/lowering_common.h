// Internal to the simulator: what the stage-level and the op-level lowerings share, the links'
// capacities, lane names, and the per-device statistics read off an engine run.
#pragma once

#include <algorithm>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "hetplan/cluster/cluster.h"
#include "hetplan/cost/collective_cost.h"
#include "hetplan/model/model.h"
#include "hetplan/plan/plan.h"
#include "hetplan/sim/events.h"
#include "hetplan/sim/simulate.h"
#include "task_graph.h"

namespace hetplan::sim::detail {

// Seconds of the pass `op` on a device of type `type` as the plan's engine runs it: an Adam step in
// the plan's form (cost::AdamKernels), a whole loss fused where the plan says so (cost::Loss),
// anything else by op_time. Both lowerings price their passes through it.
inline double engine_pass_time(const cost::ComputeCostModel& compute,
                               const cluster::DeviceType& type, const model::TrainOp& op,
                               double samples, double shard, model::DType dtype,
                               const plan::Plan& p) {
  if (op.phase == model::Phase::optimizer)
    return compute.adam_step_time(type, op, shard, dtype, p.adam).value;
  // A whole loss (the only ops with fused_bytes): op.bytes is its unfused form's traffic. The
  // engine's training metrics each take the unfused forward pass again (plan::Plan::metrics).
  const bool whole_loss = op.fused_bytes > 0;
  const double metrics = whole_loss && op.phase == model::Phase::forward && p.metrics > 0
                             ? p.metrics * compute.op_time(type, op, samples, shard, dtype).value
                             : 0.0;
  if (p.loss == cost::Loss::fused && whole_loss) {
    model::TrainOp fused = op;
    fused.bytes = op.fused_bytes;
    return compute.op_time(type, fused, samples, shard, dtype).value + metrics;
  }
  return compute.op_time(type, op, samples, shard, dtype).value + metrics;
}

// How long a pass of `ops` ops whose kernels take `kernels` seconds takes when the host needs
// `host_per_op` seconds to issue each (cost::ComputeCostModel::host_op_time): the device runs the
// kernels behind the host, so the longer of the two.
inline double host_paced(double kernels, int ops, double host_per_op) {
  return std::max(kernels, ops * host_per_op);
}

// "lane 3 (devices 8-15)", "lane 0 (device 2)".
std::string lane_name(int lane, const std::vector<int>& devices);

// Per transfer task, the lanes of the devices at its links' ends (ascending, distinct); empty for
// compute tasks. Transfers that share their loads (a pass repeated per micro-batch) share a list.
struct TransferLanes {
  std::vector<int> list_of;  // per task: index into lists, or -1
  std::vector<std::vector<int>> lists;
  std::span<const int> operator[](std::size_t t) const {
    if (list_of[t] < 0) return {};
    return lists[list_of[t]];
  }
};
TransferLanes transfer_lanes(const TaskGraph& g, const cluster::Cluster& c,
                             const std::vector<LaneInfo>& lanes);

// Per device, in one iteration the engine ran: the seconds its lane computed, the seconds with at
// least one transfer of its devices in flight, and the seconds it did either.
struct BusyTimes {
  double compute = 0, comm = 0, either = 0;
};
// A transfer is its lane's, its peer's, and that of every device at its links' ends.
// The host's time between two steps (cost::ComputeCostModel::iteration_host_time), the longest
// over the lanes' devices: at the step's synchronisation every device waits for the slowest loop.
// It ends each iteration.
double between_steps_time(const cost::ComputeCostModel& compute, const cluster::Cluster& c,
                          const std::vector<LaneInfo>& lanes);

std::vector<BusyTimes> busy_times(const TaskGraph& g, const std::vector<LaneInfo>& lanes,
                                  const TransferLanes& transfer_lanes, const EngineResult& eng,
                                  int num_devices);

// One iteration's graph run by the engine. Under CPU quotas with budgets an iteration's time
// depends on the budgets the ones before it left, so iterations run back to back, each starting
// when the one before ends: after a warm-up of at least one quota period, the mean of at least
// three iterations and 30 periods (or as many as about a million tasks allow, for large graphs:
// the mean of whole iterations is then off by up to a period over the window).
struct IterationRuns {
  EngineResult last;            // the last iteration run (deadlock: the first deadlocked)
  double iteration_time = 0;    // its makespan, or the mean over the measured iterations
  std::vector<BusyTimes> busy;  // per device, summed over the measured iterations
  long long measured = 1;       // iterations measured
  long long events = 0;         // the engine's events over every run
};
IterationRuns run_iterations(const TaskGraph& g, const std::vector<double>& link_capacity,
                             const std::vector<LaneInfo>& lanes, const TransferLanes& ends,
                             int num_devices);

// Fills r's throughput, model FLOPs (Megatron-LM's count, recomputed forward passes included), the
// devices used, the largest peak memory, whether all fit, TFLOP/s per device and MFU, from its
// iteration time and its per-device statistics (a device is used when it has a lane).
void summarise(const model::Model& m, const cluster::Cluster& c, const plan::Plan& p, SimResult& r);

}  // namespace hetplan::sim::detail
