// Internal to the simulator: the lowered task graph and the engine that runs it.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "hetplan/cost/collective_cost.h"
#include "hetplan/sim/events.h"

namespace hetplan::sim::detail {

struct Task {
  TaskKind kind = TaskKind::forward;
  bool is_transfer = false;
  int stream = 0;  // tasks of one stream run one at a time, in the stream's order
  int lane = 0;
  int peer_lane = -1;
  int stage = 0;
  int microbatch = -1;
  int bucket = -1;
  double duration = 0;  // compute: seconds; transfer: bandwidth seconds with the links to itself
  double latency = 0;   // transfer only: seconds before bytes flow
  int loads_begin = 0;  // transfer only: [loads_begin, loads_end) in TaskGraph::loads
  int loads_end = 0;
  // Transfer only: on a shared link, flows of a higher priority take the capacity first (strict
  // priority, DLCP-style); equal priorities share it by demand.
  int priority = 0;
  // On a dynamic stream: among its ready tasks the one with the smallest key runs first (ties:
  // the one that became ready first).
  double order_key = 0;
  // Bounded-loss gradient chunks (DLCP, sim/grad_chunks.h). A chunk with drop_bytes > 0 may be
  // dropped instead of sent, its bytes charged to TaskGraph::drop_budget[drop_pool]. A task with
  // drop preds (TaskGraph::drop_preds_of: chunks among its predecessors) that reaches the head of
  // its stream (is due) while some of them are still queued (ready, not started) drops those,
  // lowest priority (largest order_key) first, while the budget lasts, and starts once the rest
  // have arrived; it looks once, when it becomes due.
  double drop_bytes = 0;
  int drop_pool = -1;
  int preds = 0;  // edges into the task (TaskGraph::edges)
};

// A dependency: `to` starts after `from` ends.
struct Edge {
  int from = 0;
  int to = 0;
};

// Every task's successors, compressed: those of t are to[begin[t], begin[t + 1]), in the order
// their edges were added (the engine visits them in that order, so ties resolve as added).
struct Successors {
  std::vector<int> begin;
  std::vector<int> to;
  std::span<const int> of(int t) const {
    return {to.data() + begin[t], static_cast<std::size_t>(begin[t + 1] - begin[t])};
  }
};

// A CPU budget (cluster.h's cpu_share): `share` x `period` seconds of CPU time per period, the
// periods starting where the first iteration starts, what is left of a period's budget lost at
// its end (CFS bandwidth control). A compute task of a stream under a quota runs at full speed
// while the budget lasts and waits for the next period when it runs out. Transfers in flight on
// the quota's devices spend it at `share` (with a calibration profile, messaging between CPU
// workers is priced at the share's pace, cost/messaging.h, so that is its CPU time), but are not
// stopped when it runs out.
//
// On a host of few cores (TaskGraph::host_cores: the CPU workers of one machine), the quotas'
// compute shares the cores: while the processes computing under budget outnumber them, each
// computes at cores / processes of full speed, spending its budget at that pace. A worker without a
// cpu_share is an unlimited quota: no budget (nor period) bounds it, only the sharing of the cores.
struct CpuQuota {
  double share = 1;
  double period = 0.1;
  int processes = 1;  // the worker processes computing under it (a lane's devices), in step
  bool unlimited = false;
};

// Thrown by StopPoll out of the lowering and the engine; simulate() turns it into
// Error{kSimulationStopped}.
struct Stopped {};

// SimOptions::stop, asked at every 1024th poll().
class StopPoll {
 public:
  StopPoll() = default;
  explicit StopPoll(const std::function<bool()>& stop) : stop_(stop ? &stop : nullptr) {}
  void poll() {
    if (stop_ && (++polls_ & 1023u) == 0 && (*stop_)()) throw Stopped{};
  }

 private:
  const std::function<bool()>* stop_ = nullptr;
  unsigned polls_ = 0;
};

struct TaskGraph {
  std::vector<Task> tasks;
  // Task ids: in execution order, or for a dynamic stream in no particular order (it runs its
  // ready tasks one at a time by Task::order_key, a list schedule).
  std::vector<std::vector<int>> streams;
  std::vector<int> stream_quota;  // per stream: index into quotas, or -1
  std::vector<bool> stream_dynamic;
  std::vector<CpuQuota> quotas;
  double host_cores = 0;  // the cores the quotas' processes share; 0: a core each
  std::vector<cost::LinkLoad> loads;
  std::vector<double> drop_budget;  // bytes that may be dropped, per pool
  std::vector<Edge> edges;          // in the order added
  // Per task, transfers only: the CPU quotas of the devices at its links' ends, whose messaging
  // software it keeps busy while in flight. Empty when no task has any.
  std::vector<std::vector<int>> task_quotas;
  // Per task: the bounded-loss chunks among its predecessors it drops when late (Task::drop_bytes).
  // Empty when no task has any.
  std::vector<std::vector<int>> drop_preds;
  // Polled as tasks are added, and by the engine as it runs events (it takes a copy).
  StopPoll stop;

  int add_stream(int quota = -1, bool dynamic = false) {
    streams.emplace_back();
    stream_quota.push_back(quota);
    stream_dynamic.push_back(dynamic);
    return static_cast<int>(streams.size()) - 1;
  }
  // Appends a task to the end of its stream.
  int add_task(Task t) {
    stop.poll();
    const int id = static_cast<int>(tasks.size());
    streams[t.stream].push_back(id);
    tasks.push_back(std::move(t));
    return id;
  }
  void add_edge(int from, int to) {
    edges.push_back({from, to});
    ++tasks[to].preds;
  }
  Successors successors() const;
  void add_quota(int task, int quota) { grown(task_quotas)[task].push_back(quota); }
  void add_drop_pred(int task, int chunk) { grown(drop_preds)[task].push_back(chunk); }
  std::span<const int> quotas_of(int task) const { return listed(task_quotas, task); }
  std::span<const int> drop_preds_of(int task) const { return listed(drop_preds, task); }

 private:
  std::vector<std::vector<int>>& grown(std::vector<std::vector<int>>& per_task) const {
    // Sized to the tasks when the first is added.
    if (per_task.size() < tasks.size()) per_task.resize(tasks.size());
    return per_task;
  }
  static std::span<const int> listed(const std::vector<std::vector<int>>& per_task, int task) {
    if (static_cast<std::size_t>(task) >= per_task.size()) return {};
    return per_task[static_cast<std::size_t>(task)];
  }
};

struct EngineResult {
  double makespan = 0;
  std::vector<double> start, end;
  long long events = 0;
  bool deadlock = false;  // some task never ran (a schedule inconsistent with its dependencies)
  std::vector<char> dropped;  // per task: a chunk dropped (start == end, when it was dropped)
};

// What one iteration hands the next when they run back to back: per quota, the budget left and
// the end of its current period, from the next iteration's start.
struct EngineCarry {
  std::vector<double> budget;  // empty: every quota starts a period with its whole budget
  std::vector<double> period_end;
};

// link_capacity[l]: bytes/s that link l carries for transfers (bandwidth times efficiency). With
// `carry`, the iteration starts (at 0) with its quotas' state, and leaves in it the state at its
// end for the next.
EngineResult run_engine(const TaskGraph& g, const std::vector<double>& link_capacity,
                        EngineCarry* carry = nullptr);

}  // namespace hetplan::sim::detail
