// Internal to the command line: the HTML report of a training run (hetplan run --report): what
// ran, its loss curve beside those of runs it is compared with, each step's gradient
// synchronisation time, and each rank's times and dropped gradient share.
#pragma once

#include <string>
#include <vector>

#include "hetplan/core/error.h"
#include "hetplan/plan/plan.h"
#include "hetplan/runtime/run.h"

namespace hetplan::cli {

struct ComparedRun {
  std::string name;  // the file's name without its directory and extension
  int first_step = 0;
  std::vector<double> losses;
};

// A run's losses from the JSON `hetplan run --json` prints (losses, first_step); errors name
// `file` and the field (`--compare` names the option).
Result<ComparedRun> read_compared_run(const std::string& file);

struct RunReportInput {
  std::string title;  // "hetplan run: gpt:... on 2 ranks"
  std::string model;
  const plan::Plan& plan;
  const runtime::RunResult& result;
  std::vector<ComparedRun> compared;
  bool parameter_servers = false;  // every gradient summed by parameter servers
};

std::string run_report_html(const RunReportInput& in);

}  // namespace hetplan::cli
