#include "measured_run.h"

#include <fmt/format.h>

#include "hetplan/core/error.h"
#include "hetplan/core/json_util.h"
#include "hetplan/plan/plan_json.h"

namespace hetplan::cli {

namespace {
constexpr const char* kKind = "hetplan measured run";
}  // namespace

nlohmann::ordered_json measured_run_json(const MeasuredRun& r) {
  nlohmann::ordered_json j;
  j["version"] = 1;
  j["kind"] = kKind;
  j["model"] = r.model;
  j["cluster"] = r.cluster;
  j["first_step"] = r.first_step;
  j["step_times_s"] = r.step_times_s;
  j["mean_step_time_s"] = r.mean_step_time_s;
  j["threads_per_rank"] = r.threads_per_rank;
  j["ranks"] = nlohmann::ordered_json::array();
  for (const auto& k : r.ranks)
    j["ranks"].push_back({{"rank", k.rank},
                          {"device", k.device},
                          {"compute_s", k.compute_s},
                          {"comm_s", k.comm_s},
                          {"idle_s", k.idle_s}});
  j["plan"] = nlohmann::ordered_json::parse(plan::to_json(r.plan).dump());
  return j;
}

Result<MeasuredRun> read_measured_run(const std::string& file) {
  std::string text;
  try {
    text = read_text_file(file);
  } catch (const InputError&) {
    return Error{fmt::format("--measured: {}: cannot read the file", file)};
  }
  nlohmann::json j;
  try {
    j = parse_json_unique_keys(text);
  } catch (const nlohmann::json::exception& e) {
    return Error{fmt::format("--measured: {}: not JSON: {}", file, e.what())};
  } catch (const InputError& e) {
    return Error{fmt::format("--measured: {}: {}", file, e.what())};
  }
  try {
    auto field = [&](const char* name) -> const nlohmann::json* {
      return j.is_object() && j.contains(name) ? &j[name] : nullptr;
    };
    const auto* version = field("version");
    const auto* kind = field("kind");
    if (!version || !version->is_number_integer() || version->get<int>() != 1 || !kind ||
        !kind->is_string() || kind->get<std::string>() != kKind)
      return Error{fmt::format(
          "--measured: {}: expected {{\"version\": 1, \"kind\": \"{}\", ...}} (hetplan run "
          "--measured-out writes it)",
          file, kKind)};
    MeasuredRun r;
    const auto* mean = field("mean_step_time_s");
    if (!mean || !mean->is_number() || !(mean->get<double>() > 0))
      return Error{fmt::format(
          "--measured: {}: mean_step_time_s: expected a positive number of seconds", file)};
    r.mean_step_time_s = mean->get<double>();
    const auto* times = field("step_times_s");
    if (!times || !times->is_array())
      return Error{fmt::format("--measured: {}: step_times_s: expected an array of seconds", file)};
    for (const auto& t : *times) {
      if (!t.is_number())
        return Error{fmt::format("--measured: {}: step_times_s: expected numbers", file)};
      r.step_times_s.push_back(t.get<double>());
    }
    for (const char* name : {"model", "cluster"}) {
      const auto* v = field(name);
      if (!v || !v->is_string())
        return Error{fmt::format("--measured: {}: {}: expected a string", file, name)};
    }
    r.model = j["model"].get<std::string>();
    r.cluster = j["cluster"].get<std::string>();
    if (const auto* ranks = field("ranks"); ranks && ranks->is_array())
      for (const auto& k : *ranks) {
        if (!k.is_object())
          return Error{fmt::format("--measured: {}: ranks: expected objects", file)};
        MeasuredRank m;
        m.rank = k.value("rank", 0);
        m.device = k.value("device", 0);
        m.compute_s = k.value("compute_s", 0.0);
        m.comm_s = k.value("comm_s", 0.0);
        m.idle_s = k.value("idle_s", 0.0);
        r.ranks.push_back(m);
      }
    r.first_step = j.value("first_step", 0);
    r.threads_per_rank = j.value("threads_per_rank", 1);
    return r;
  } catch (const nlohmann::json::exception& e) {
    return Error{fmt::format("--measured: {}: {}", file, e.what())};
  }
}

}  // namespace hetplan::cli
