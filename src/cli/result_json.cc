#include "result_json.h"

#include <fmt/format.h>

#include <algorithm>

namespace hetplan::cli {

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
                    {"buffers_bytes", d.memory.buffers.value},
                    {"fits", d.fits}});
  }
  j["devices"] = devs;
  j["num_tasks"] = r.num_tasks;
  j["num_events"] = r.num_events;
  return j;
}

}  // namespace hetplan::cli
