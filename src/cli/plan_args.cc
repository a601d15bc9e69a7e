#include "plan_args.h"

#include <fmt/format.h>

#include <cstdio>

#include "hetplan/cluster/cluster_file.h"
#include "hetplan/core/quantity_parse.h"
#include "hetplan/cost/messaging.h"
#include "hetplan/model/zoo.h"
#include "hetplan/plan/plan_json.h"
#include "hetplan/plan/strategy.h"
#include "hetplan/plan/validate.h"

namespace hetplan::cli {

Result<model::Model> model_in_precision(const plan::Plan& p, model::Model m,
                                        const std::string& model_spec, const std::string& source) {
  if (!p.precision || *p.precision == m.dtype) return m;
  auto built = model::load_model(model_spec, "--model", *p.precision);
  if (!built)
    return Error{fmt::format("{}: precision={}: {}", source, plan::precision_name(*p.precision),
                             built.error().message)};
  return built;
}

Result<plan::Plan> plan_from_args(const std::string& plan_file, const std::string& strategy,
                                  const std::string& default_strategy, model::Model& m,
                                  const std::string& model_spec, const cluster::Cluster& c) {
  if (!strategy.empty() && !plan_file.empty())
    return Error{"--strategy and --plan: expected one of them, not both"};
  if (!plan_file.empty())
    return prepared_plan(plan::read_plan_file(plan_file), plan_file, m, model_spec, c);
  auto s = plan::parse_strategy(strategy.empty() ? default_strategy : strategy, "--strategy");
  if (!s) return s.error();
  return prepared_plan(plan::plan_from_strategy(*s, m, c, "--strategy"), "--strategy", m,
                       model_spec, c);
}

Result<plan::Plan> prepared_plan(Result<plan::Plan> read, const std::string& source,
                                 model::Model& m, const std::string& model_spec,
                                 const cluster::Cluster& c) {
  if (!read) return read.error();
  auto in_precision = model_in_precision(*read, std::move(m), model_spec, source);
  if (!in_precision) return in_precision.error();
  m = std::move(*in_precision);
  return validated_plan(std::move(*read), m, c, source);
}

Result<plan::Plan> validated_plan(plan::Plan p, const model::Model& m, const cluster::Cluster& c,
                                  const std::string& source) {
  if (auto valid = plan::validate_plan(p, m, c, source); !valid) return valid.error();
  warn_single_route_spray(p, c, source);
  return p;
}

namespace {

// The error for `option` given as `loaded` (or `reference`, what loads it again) where the plan
// names `planned`; "" when they agree.
std::string disagreement(const std::string& option, bool given, const std::string& loaded,
                         const std::string& reference, const std::string& planned,
                         const std::string& plan_file) {
  if (!given || planned.empty() || loaded == planned || reference == planned) return "";
  return fmt::format(
      "{0}: {1} is not the plan's {2} ({3} was made for {2} \"{4}\"); leave {0} out to use the "
      "plan's",
      option, loaded, option == "--model" ? "model" : "cluster", plan_file, planned);
}

}  // namespace

Result<PlanWithInputs> read_plan_with_inputs(const std::string& plan_file,
                                             const ModelClusterArgs& a) {
  auto read = plan::read_plan_file(plan_file);
  if (!read) return read.error();
  const std::string model_spec = a.model_given || read->model.empty() ? a.model : read->model;
  const std::string cluster_spec =
      a.cluster_given || read->cluster.empty() ? a.cluster : read->cluster;
  // Where the plan named them, a model or cluster that does not load is the plan's to explain.
  auto planned = [&](bool given, const char* what, const std::string& error) {
    return Error{given ? error : plan_input_error(plan_file, what, error)};
  };
  auto m = model::load_model(model_spec, "--model");
  if (!m) return planned(a.model_given, "model", m.error().message);
  auto c = cluster::load_cluster(cluster_spec, "--cluster");
  if (!c) return planned(a.cluster_given, "cluster", c.error().message);
  if (auto bad = disagreement("--model", a.model_given, m->name, m->name, read->model, plan_file);
      !bad.empty())
    return Error{bad};
  if (auto bad = disagreement("--cluster", a.cluster_given, c->name, c->reference_or_name(),
                              read->cluster, plan_file);
      !bad.empty())
    return Error{bad};
  m = model_in_precision(*read, std::move(*m), model_spec, plan_file);
  if (!m) return m.error();
  auto p = validated_plan(std::move(*read), *m, *c, plan_file);
  if (!p) return p.error();
  return PlanWithInputs{std::move(*p), std::move(*m), std::move(*c), model_spec, cluster_spec};
}

std::string plan_input_error(const std::string& plan_file, const char* what,
                             const std::string& error) {
  return fmt::format("--plan {}: its {} does not load ({}); give --{} explicitly", plan_file, what,
                     error, what);
}

void warn_single_route_spray(const plan::Plan& p, const cluster::Cluster& c,
                             const std::string& source) {
  if (p.multipath != plan::Multipath::spray || c.multipath()) return;
  std::fprintf(stderr,
               "hetplan: warning: %s: multipath=spray: cluster %s has one route between every "
               "two devices (spraying needs a leaf-spine network with two spines or more), so it "
               "changes nothing\n",
               source.c_str(), c.name.c_str());
}

std::string strategy_not_blank(const std::string& value) {
  if (value.find_first_not_of(" \t") != std::string::npos) return "";
  return "expected key=value pairs separated by commas (e.g. dp=4,tp=2), got an empty value; "
         "leave --strategy out for the default";
}

Result<std::shared_ptr<const cost::CalibrationProfile>> calibration_from_args(
    const std::string& file, cluster::Cluster& c, const cost::NetworkParams& network) {
  auto prof = cost::read_calibration_profile(file);
  if (!prof) return prof.error();
  c = cost::with_measured_messaging(std::move(c), *prof, network);
  return std::make_shared<const cost::CalibrationProfile>(std::move(*prof));
}

Result<double> grad_chunk_from_arg(const std::string& text) {
  const auto chunk = parse_bytes(text);
  if (!chunk || !(chunk->value >= 4096) || !(chunk->value <= 1024.0 * 1024 * 1024))
    return Error{
        fmt::format("--grad-chunk: expected a size from 4KiB to 1GiB (e.g. 256KiB), got '{}'", text)};
  return chunk->value;
}

}  // namespace hetplan::cli
