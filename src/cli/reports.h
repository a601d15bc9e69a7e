// Internal to the command line: writing the HTML reports of `plan` and `pareto`.
#pragma once

#include <string>

#include "hetplan/search/rent.h"
#include "hetplan/search/search.h"
#include "hetplan/sim/simulate.h"

namespace hetplan::cli {

// One line describing a plan's shape: "2 stages, 32 replicas, 32 micro-batches, recompute none,
// zero 1" (the pareto table and the report's frontier labels).
std::string plan_label(const plan::Plan& p);

// DLCP's gradient transport of a plan and what the simulation dropped: "priority layer+magnitude,
// multipath spray, loss bound 5%: dropped 4.95% of the bytes (2.142% of the squared norm)";
// "" when the plan leaves it at its defaults.
std::string gradient_transport_text(const plan::Plan& p, const sim::SimResult& r);

// Both return 0, or the exit code after reporting why the file could not be written.
// `result` must have been simulated with events recorded.
int write_plan_report(const std::string& file, const model::Model& m, const cluster::Cluster& c,
                      const search::SearchResult& res, const sim::SimResult& result,
                      const search::FrontierResult* frontier,
                      const search::RentResult* rent = nullptr);
// The report of the frontier's fastest plan, with the whole frontier plotted.
int write_pareto_report(const std::string& file, const model::Model& m, const cluster::Cluster& c,
                        const search::FrontierResult& res);

}  // namespace hetplan::cli
