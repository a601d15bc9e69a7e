// Internal to the simulator: the lowered task graph and the engine that runs it.
#pragma once

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
  int preds = 0;
  std::vector<int> succs;
};

struct TaskGraph {
  std::vector<Task> tasks;
  std::vector<std::vector<int>> streams;  // task ids in execution order
  std::vector<cost::LinkLoad> loads;

  int add_stream() {
    streams.emplace_back();
    return static_cast<int>(streams.size()) - 1;
  }
  // Appends a task to the end of its stream.
  int add_task(Task t) {
    const int id = static_cast<int>(tasks.size());
    streams[t.stream].push_back(id);
    tasks.push_back(std::move(t));
    return id;
  }
  void add_edge(int from, int to) {
    tasks[from].succs.push_back(to);
    ++tasks[to].preds;
  }
};

struct EngineResult {
  double makespan = 0;
  std::vector<double> start, end;
  long long events = 0;
  bool deadlock = false;  // some task never ran (a schedule inconsistent with its dependencies)
};

// link_capacity[l]: bytes/s that link l carries for transfers (bandwidth times efficiency).
EngineResult run_engine(const TaskGraph& g, const std::vector<double>& link_capacity);

}  // namespace hetplan::sim::detail
