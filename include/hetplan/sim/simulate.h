// The discrete-event simulator: lowers (model, cluster, plan) into compute and communication
// tasks and runs them. Per lane (a tensor-parallel replica) one compute stream in schedule order;
// transfers on their own streams, overlapping compute; links shared by concurrent transfers
// (a link's capacity is split in proportion to the demand of the flows crossing it); gradient
// synchronisation in buckets that start as the last backward pass produces them. Devices of
// nodes with a cpu_share compute under a CPU quota (cluster.h: a budget per period, spent by their
// compute and their messaging; one per lane, at the share that keeps the lane's compute-bound
// time, so none for a lane whose work is split in proportion to its devices' unlike shares), and
// the iteration time is then the mean of iterations run back to back over at least 30 periods
// (or a million tasks), after a warm-up. With a grad_priority (DLCP), gradients travel in
// prioritised chunks and iterations overlap (simulate.cc's simulate_unrolled).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "hetplan/cluster/cluster.h"
#include "hetplan/core/error.h"
#include "hetplan/cost/collective_cost.h"
#include "hetplan/cost/compute_cost.h"
#include "hetplan/cost/memory_cost.h"
#include "hetplan/model/model.h"
#include "hetplan/plan/plan.h"
#include "hetplan/sim/events.h"

namespace hetplan::sim {

struct SimOptions {
  cost::ComputeParams compute = cost::ComputeParams::defaults();
  cost::NetworkParams network = cost::NetworkParams::defaults();
  std::shared_ptr<const cost::CalibrationProfile> profile;
  bool record_events = false;  // keep TaskRecords (for traces and timelines)
  // DLCP's chunk size (plan.h's GradPriority, sim/grad_chunks.h): bytes per chunk of each
  // tensor-parallel rank's gradient.
  double grad_chunk_bytes = 256.0 * 1024;
  // Asked before a plan is lowered and then every thousand tasks lowered and events run: once
  // it returns true the simulation is abandoned and simulate() returns Error{kSimulationStopped}
  // (a search past its time limit stops one it no longer needs). Empty: never stops.
  std::function<bool()> stop;
  // The cores of the host on which the workers of nodes with a cpu_share (under CPU quotas) all
  // run, as `hetplan run --emulate` runs them: while more of them compute under budget than it
  // has cores, they share the cores (task_graph.h's CpuQuota). 0: each has a core of its own.
  int host_cores = 0;
};

// The message of the error simulate() returns when SimOptions::stop stopped it.
inline constexpr const char* kSimulationStopped = "simulation stopped (SimOptions::stop)";

struct DeviceStats {
  int device = 0;
  int lane = -1;  // -1: the plan does not use this device
  Seconds compute_busy;
  Seconds comm_busy;             // time with at least one transfer of its devices in flight
  Seconds idle;                  // time neither computing nor with a transfer in flight
  cost::MemoryBreakdown memory;  // at the peak
  Bytes peak_memory;
  Bytes capacity;
  bool fits = true;
};

struct SimResult {
  Seconds iteration_time;
  double samples_per_s = 0;
  double tokens_per_s = 0;       // 0 for models without tokens
  double model_flops = 0;        // per iteration, counting recomputed forward passes (Megatron-LM)
  double tflops_per_device = 0;  // model_flops / iteration_time / devices used / 1e12
  double mfu = 0;                // model FLOPs without recomputation / (time * sum of peaks)
  int devices_used = 0;
  std::vector<DeviceStats> devices;  // one per cluster device
  Bytes max_peak_memory;
  bool fits = true;
  std::vector<LaneInfo> lanes;
  std::vector<TaskRecord> events;  // when SimOptions::record_events
  long long num_tasks = 0;
  long long num_events = 0;  // events processed by the engine
  // With a loss_bound: the fraction of the gradient bytes dropped per iteration, and under
  // sim/grad_chunks.h's magnitude model the fraction of the gradient's squared norm they carried.
  double grad_dropped_fraction = 0;
  double grad_dropped_norm_fraction = 0;
};

// The plan must have been validated (plan::validate_plan); errors here are for plans the
// simulator cannot express (named in the message).
Result<SimResult> simulate(const model::Model& m, const cluster::Cluster& c, const plan::Plan& p,
                           const SimOptions& opts);

}  // namespace hetplan::sim
