// Internal to the command line: the HTML report of a plan (one self-contained file, no network
// access): the cluster, the plan (which device runs what, with ratios), a per-device timeline of
// one iteration, per-device memory against capacity, the comparison with the baselines, and the
// Pareto frontier of iteration time against peak memory as a plot.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hetplan/cluster/cluster.h"
#include "hetplan/model/model.h"
#include "hetplan/plan/plan.h"
#include "hetplan/sim/simulate.h"

namespace hetplan::cli {

struct ReportBaseline {
  std::string name;                        // "even-dp", "proportional-dp", "megatron"
  std::optional<double> iteration_time_s;  // empty when it produced no plan
  bool fits = false;
};

struct ReportFrontierPoint {
  double iteration_time_s = 0;
  double max_peak_bytes = 0;
  std::string label;    // short description of the plan ("pp=2 tp=1 recompute=full zero=1")
  bool chosen = false;  // the plan the report is about
};

// A subset of the cluster's devices priced by `plan --objective cost` (search/rent.h).
struct ReportRentPoint {
  std::string label;  // "8 x H100-SXM5-80GB + 4 x L4"
  bool fits = false;  // a plan that fits was found (then the figures below are set)
  double iteration_time_s = 0;
  double usd_per_hour = 0;  // of the devices the plan uses
  double usd_per_iteration = 0;
  std::string note;  // why skipped or not fitting, or the limit it misses
  bool chosen = false, fastest = false;
};

struct ReportInput {
  const model::Model& model;
  const cluster::Cluster& cluster;
  const plan::Plan& plan;
  const sim::SimResult& result;  // simulated with SimOptions::record_events = true
  std::string title;             // "hetplan plan: gpt3-1.3b on hap-mixed"
  std::string planner;           // which planner chose the plan
  double search_time_s = 0;
  bool timed_out = false;
  std::vector<ReportBaseline> baselines;      // may be empty (pareto reports)
  std::vector<ReportFrontierPoint> frontier;  // may be empty (then no plot, a note instead)
  std::vector<ReportRentPoint> rent;          // empty: the plan was not chosen by price
};

// The whole HTML document.
std::string report_html(const ReportInput& in);

}  // namespace hetplan::cli
