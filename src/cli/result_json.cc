#include "result_json.h"

namespace hetplan::cli {

nlohmann::ordered_json sim_result_json(const model::Model& m, const plan::Plan& p,
                                       const sim::SimResult& r) {
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
