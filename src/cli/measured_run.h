// Internal to the command line: what `hetplan run --measured-out` writes and `hetplan simulate
// --measured` reads back, so that a prediction can be set against the run it predicts.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hetplan/core/error.h"
#include "hetplan/plan/plan.h"

namespace hetplan::cli {

struct MeasuredRank {
  int rank = 0;
  int device = 0;                                // the plan's device index the rank ran as
  double compute_s = 0, comm_s = 0, idle_s = 0;  // summed over the measured steps
};

// One run: which model, cluster and plan, and what each step took.
struct MeasuredRun {
  std::string model, cluster;
  plan::Plan plan;
  int first_step = 0;
  std::vector<double> step_times_s;
  double mean_step_time_s = 0;  // without the first two steps
  int threads_per_rank = 1;
  std::vector<MeasuredRank> ranks;
};

// Format version 1: {"version": 1, "kind": "hetplan measured run", "model", "cluster", "plan",
// "first_step", "step_times_s", "mean_step_time_s", "threads_per_rank", "ranks": [{"rank",
// "device", "compute_s", "comm_s", "idle_s"}]}.
nlohmann::ordered_json measured_run_json(const MeasuredRun& r);
// Reads that format back; errors name the file and the field.
Result<MeasuredRun> read_measured_run(const std::string& file);

}  // namespace hetplan::cli
