// What the simulator emits: one record per executed task. The Chrome trace, the HTML timeline and
// the statistics read these records, never the simulator's insides.
#pragma once

#include <string>
#include <vector>

#include "hetplan/core/units.h"

namespace hetplan::sim {

// grad_rebuild: a replica rebuilds weight gradients from gathered sufficient factors (compute).
// tp_comm: the tensor-parallel collectives of a pass (or of a gradient bucket's part of the last
// backward pass), run after that compute on its stream: the lane's next task waits for them.
enum class TaskKind {
  forward,
  backward,
  optimizer,
  p2p,
  grad_sync,
  param_gather,
  grad_rebuild,
  tp_comm,
  recompute  // an op-level plan's forward passes rerun before a backward pass
};
const char* to_string(TaskKind k);
// Whether tasks of this kind move data over links (the others compute).
bool is_transfer(TaskKind k);

struct TaskRecord {
  TaskKind kind = TaskKind::forward;
  int lane = 0;        // compute lane (a replica's device set); for transfers the sending lane
  int peer_lane = -1;  // receiving lane of a p2p transfer, -1 otherwise
  int stage = 0;
  int microbatch = -1;  // -1 when not per micro-batch
  int bucket = -1;      // gradient bucket (grad_sync, split backward), -1 otherwise
  Seconds start;
  Seconds end;
};

// A lane is the set of devices that run the same tasks in lock step (one tensor-parallel replica).
struct LaneInfo {
  std::vector<int> devices;
  std::vector<int> stages;  // the stages (chunks) it runs, ascending
  std::string name;         // "lane 3 (devices 8-15)"
};

}  // namespace hetplan::sim
