#include "plan_args.h"

#include <fmt/format.h>

#include <cstdio>

#include "hetplan/core/quantity_parse.h"
#include "hetplan/cost/messaging.h"
#include "hetplan/plan/plan_json.h"
#include "hetplan/plan/strategy.h"
#include "hetplan/plan/validate.h"

namespace hetplan::cli {

Result<plan::Plan> plan_from_args(const std::string& plan_file, const std::string& strategy,
                                  const std::string& default_strategy, const model::Model& m,
                                  const cluster::Cluster& c) {
  if (!strategy.empty() && !plan_file.empty())
    return Error{"--strategy and --plan: expected one of them, not both"};
  Result<plan::Plan> p = Error{""};
  std::string source;
  if (!plan_file.empty()) {
    p = plan::read_plan_file(plan_file);
    source = plan_file;
  } else {
    auto s = plan::parse_strategy(strategy.empty() ? default_strategy : strategy, "--strategy");
    if (!s) return s.error();
    p = plan::plan_from_strategy(*s, m, c, "--strategy");
    source = "--strategy";
  }
  if (!p) return p.error();
  if (auto valid = plan::validate_plan(*p, m, c, source); !valid) return valid.error();
  warn_single_route_spray(*p, c, source);
  return p;
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
