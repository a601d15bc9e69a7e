#include "result_json.h"

#include <fmt/format.h>

#include <algorithm>

namespace hetplan::cli {
namespace {

// The hourly price of the devices a simulated plan uses, and the names of their types that have
// none (then the sum is incomplete).
struct PlanPrice {
  UsdPerHour per_hour;
  int devices = 0;
  std::vector<std::string> unpriced;
};

PlanPrice plan_price(const cluster::Cluster& c, const sim::SimResult& r) {
  PlanPrice out;
  for (const auto& d : r.devices) {
    if (d.lane < 0) continue;
    const auto& t = c.type_of(d.device);
    ++out.devices;
    out.per_hour += t.price_per_hour;
    if (t.price_source.empty() &&
        std::find(out.unpriced.begin(), out.unpriced.end(), t.name) == out.unpriced.end())
      out.unpriced.push_back(t.name);
  }
  return out;
}

}  // namespace

std::string price_text(const cluster::Cluster& c, const sim::SimResult& r) {
  const PlanPrice p = plan_price(c, r);
  if (!p.unpriced.empty()) {
    std::string names;
    for (const auto& n : p.unpriced) names += (names.empty() ? "" : ", ") + n;
    return fmt::format("unknown: no price for {} (the cluster file's `prices` can give one)",
                       names);
  }
  return fmt::format("${:.4g} per iteration (${:.2f} per hour for {} devices)",
                     (p.per_hour * r.iteration_time).value, p.per_hour.value, p.devices);
}

std::vector<TypeSamples> samples_by_device_type(const plan::Plan& p, const cluster::Cluster& c) {
  std::vector<TypeSamples> out;
  for (std::size_t s = 0; s < p.stages.size(); ++s) {
    const std::size_t first = out.size();
    for (const auto& r : p.stages[s].replicas)
      for (std::size_t j = 0; j < r.devices.size(); ++j) {
        const auto& type =
            c.device_types[static_cast<std::size_t>(
                               c.devices[static_cast<std::size_t>(r.devices[j])].type)]
                .name;
        auto it = std::find_if(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(),
                               [&](const TypeSamples& t) { return t.device_type == type; });
        if (it == out.end()) it = out.insert(out.end(), {static_cast<int>(s), type, 0, 0});
        ++it->devices;
        it->samples += r.batch_share * static_cast<double>(p.global_batch) * plan::tp_share(r, j);
      }
  }
  return out;
}

std::string samples_by_device_type_text(const plan::Plan& p, const cluster::Cluster& c) {
  const auto all = samples_by_device_type(p, c);
  std::vector<std::string> stages(p.stages.size());
  for (const auto& t : all)
    stages[static_cast<std::size_t>(t.stage)] += fmt::format(
        "{}{} x{}: {:.4g}", stages[static_cast<std::size_t>(t.stage)].empty() ? "" : ", ",
        t.device_type, t.devices, t.samples);
  if (stages.empty()) return "";
  if (std::all_of(stages.begin(), stages.end(),
                  [&](const std::string& s) { return s == stages[0]; }))
    return stages.size() == 1 ? stages[0] : "each stage: " + stages[0];
  std::string text;
  for (std::size_t s = 0; s < stages.size(); ++s)
    text += fmt::format("{}stage {}: {}", s == 0 ? "" : "; ", s, stages[s]);
  return text;
}

nlohmann::ordered_json sim_result_json(const model::Model& m, const cluster::Cluster& c,
                                       const plan::Plan& p, const sim::SimResult& r) {
  nlohmann::ordered_json j;
  j["model"] = m.name;
  j["planner"] = p.planner;
  j["iteration_time_s"] = r.iteration_time.value;
  j["samples_per_s"] = r.samples_per_s;
  if (m.is_language_model()) j["tokens_per_s"] = r.tokens_per_s;
  j["tflops_per_device"] = r.tflops_per_device;
  j["mfu"] = r.mfu;
  j["model_flops_per_iteration"] = r.model_flops;
  j["devices_used"] = r.devices_used;
  if (!c.type_aliases.empty()) {
    auto aliases = nlohmann::ordered_json::object();
    for (const auto& a : c.type_aliases) aliases[a.written] = a.canonical;
    j["device_type_aliases"] = aliases;
  }
  {
    const PlanPrice price = plan_price(c, r);
    nlohmann::ordered_json pj;
    pj["usd_per_hour"] = price.unpriced.empty() ? nlohmann::ordered_json(price.per_hour.value)
                                                : nlohmann::ordered_json(nullptr);
    pj["usd_per_iteration"] =
        price.unpriced.empty() ? nlohmann::ordered_json((price.per_hour * r.iteration_time).value)
                               : nlohmann::ordered_json(nullptr);
    pj["unpriced_device_types"] = price.unpriced;
    j["price"] = pj;
  }
  if (!p.is_op_level()) {
    auto per_type = nlohmann::ordered_json::array();
    for (const auto& t : samples_by_device_type(p, c))
      per_type.push_back({{"stage", t.stage},
                          {"device_type", t.device_type},
                          {"devices", t.devices},
                          {"samples", t.samples}});
    j["samples_by_device_type"] = per_type;
  }
  if (p.grad_priority != plan::GradPriority::none || p.multipath != plan::Multipath::ecmp)
    j["gradients"] = {{"grad_priority", plan::to_string(p.grad_priority)},
                      {"loss_bound", p.loss_bound},
                      {"multipath", plan::to_string(p.multipath)},
                      {"dropped_fraction", r.grad_dropped_fraction},
                      {"dropped_norm_fraction", r.grad_dropped_norm_fraction}};
  nlohmann::ordered_json mem;
  auto peaks = nlohmann::ordered_json::array();
  auto caps = nlohmann::ordered_json::array();
  for (const auto& d : r.devices) {
    peaks.push_back(d.peak_memory.value);
    caps.push_back(d.capacity.value);
  }
  mem["peak_bytes_per_device"] = peaks;
  mem["capacity_bytes_per_device"] = caps;
  mem["max_peak_bytes"] = r.max_peak_memory.value;
  mem["fits"] = r.fits;
  j["memory"] = mem;
  auto devs = nlohmann::ordered_json::array();
  for (const auto& d : r.devices) {
    devs.push_back({{"device", d.device},
                    {"lane", d.lane},
                    {"compute_busy_s", d.compute_busy.value},
                    {"comm_busy_s", d.comm_busy.value},
                    {"idle_s", d.idle.value},
                    {"peak_bytes", d.peak_memory.value},
                    {"parameters_bytes", d.memory.parameters.value},
                    {"gradients_bytes", d.memory.gradients.value},
                    {"optimizer_bytes", d.memory.optimizer.value},
                    {"activations_bytes", d.memory.activations.value},
                    {"transient_bytes", d.memory.transient.value},
                    {"buffers_bytes", d.memory.buffers.value},
                    {"reserve_bytes", d.memory.reserve.value},
                    {"fragmentation_bytes", d.memory.fragmentation.value},
                    {"fits", d.fits}});
  }
  j["devices"] = devs;
  j["num_tasks"] = r.num_tasks;
  j["num_events"] = r.num_events;
  return j;
}

}  // namespace hetplan::cli
