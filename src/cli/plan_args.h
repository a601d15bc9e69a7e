// Internal to the command line: the plan a command works on, from --plan FILE or the --strategy
// shorthand (simulate and run share it).
#pragma once

#include <memory>
#include <string>

#include "hetplan/cluster/cluster.h"
#include "hetplan/core/error.h"
#include "hetplan/cost/collective_cost.h"
#include "hetplan/cost/compute_cost.h"
#include "hetplan/model/model.h"
#include "hetplan/plan/plan.h"

namespace hetplan::cli {

// The plan of `plan_file`, or of `strategy` (or `default_strategy` when both are empty), validated
// against the model and cluster. Errors name the file or argument and the field. Where the plan
// names a precision the model is not built in, `m` is rebuilt from `model_spec` in it.
Result<plan::Plan> plan_from_args(const std::string& plan_file, const std::string& strategy,
                                  const std::string& default_strategy, model::Model& m,
                                  const std::string& model_spec, const cluster::Cluster& c);

// As plan_from_args, for a plan already read from `source` (a file, or --strategy's plan): the
// read's error, or the plan validated with `m` rebuilt in its precision.
Result<plan::Plan> prepared_plan(Result<plan::Plan> read, const std::string& source,
                                 model::Model& m, const std::string& model_spec,
                                 const cluster::Cluster& c);

// `m` rebuilt from `model_spec` in p's precision where p names one that m is not built in (a
// plan is costed and run in its precision); the error names `source`, the plan's file or option.
Result<model::Model> model_in_precision(const plan::Plan& p, model::Model m,
                                        const std::string& model_spec, const std::string& source);

// The model and cluster a command names, and whether they were given on its command line.
struct ModelClusterArgs {
  std::string model, cluster;
  bool model_given = false, cluster_given = false;
};

// A plan file with what it was made for: the model and cluster given on the command line, else
// the plan's own `model` and `cluster`. A given one that is not the plan's is an error ("--model:
// X is not the plan's model ..."), as is a plan's own that does not load (naming the plan file
// and asking for the option). The plan is validated against them.
struct PlanWithInputs {
  plan::Plan plan;
  model::Model model;
  cluster::Cluster cluster;
  std::string model_spec, cluster_spec;  // what the model and cluster were loaded from
};
Result<PlanWithInputs> read_plan_with_inputs(const std::string& plan_file,
                                             const ModelClusterArgs& a);
// The error when a plan's own `what` ("model" or "cluster") does not load: the plan's to explain.
std::string plan_input_error(const std::string& plan_file, const char* what,
                             const std::string& error);

// p validated against the model and cluster (errors name `source`), with the spray warning.
Result<plan::Plan> validated_plan(plan::Plan p, const model::Model& m, const cluster::Cluster& c,
                                  const std::string& source);

// multipath=spray on a cluster without equal routes changes nothing: a warning on stderr naming
// `source` (not an error: the plan runs as with ecmp).
void warn_single_route_spray(const plan::Plan& p, const cluster::Cluster& c,
                             const std::string& source);

// The gradient chunk size of `--grad-chunk TEXT` (simulate and run share it): 4 KiB to 1 GiB.
Result<double> grad_chunk_from_arg(const std::string& text);

// A CLI11 check for --strategy: a blank value would silently mean the default strategy, so it
// is refused ("expected key=value pairs ..."); "" for any other value.
std::string strategy_not_blank(const std::string& value);

// The calibration profile of `--calibration FILE` (simulate, plan and run share it), with the
// workers it measured talking to each other applied to `c`'s links (cost/messaging.h), so that
// every command prices those links alike.
Result<std::shared_ptr<const cost::CalibrationProfile>> calibration_from_args(
    const std::string& file, cluster::Cluster& c, const cost::NetworkParams& network);

}  // namespace hetplan::cli
