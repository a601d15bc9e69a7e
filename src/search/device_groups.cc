#include "hetplan/search/device_groups.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <tuple>

namespace hetplan::search {

std::vector<int> DeviceGroup::devices() const {
  std::vector<int> out;
  for (const auto& n : nodes) out.insert(out.end(), n.begin(), n.end());
  return out;
}

std::vector<DeviceGroup> device_groups(const cluster::Cluster& c) {
  std::vector<DeviceGroup> out;
  std::map<std::tuple<int, int, std::string>, int> index;
  for (const auto& node : c.nodes) {
    std::map<int, std::vector<int>> by_type;
    for (int d : node.devices) by_type[c.devices[d].type].push_back(d);
    for (auto& [type, devs] : by_type) {
      const std::string name = c.groups.empty() ? c.device_types[type].name : node.group;
      auto key = std::make_tuple(type, static_cast<int>(devs.size()), name);
      auto it = index.find(key);
      if (it == index.end()) {
        it = index.emplace(key, static_cast<int>(out.size())).first;
        DeviceGroup g;
        g.name = name;
        g.type = type;
        g.devices_per_node = static_cast<int>(devs.size());
        out.push_back(g);
      }
      out[it->second].nodes.push_back(devs);
    }
  }
  return out;
}

std::vector<plan::Replica> tp_replicas(const cluster::Cluster& c, const std::vector<int>& devices,
                                       int tp) {
  std::vector<plan::Replica> out;
  std::size_t i = 0;
  while (i < devices.size()) {
    if (i + tp > devices.size()) return {};
    plan::Replica r;
    for (int k = 0; k < tp; ++k) {
      if (!c.same_node(devices[i + k], devices[i])) return {};
      r.devices.push_back(devices[i + k]);
    }
    out.push_back(std::move(r));
    i += tp;
  }
  return out;
}

double device_peak(const cluster::Cluster& c, int device, model::DType dt) {
  return c.type_of(device).peak(dt).value * c.nodes[c.devices[device].node].cpu_share;
}

std::vector<std::int64_t> proportional_split(const std::vector<double>& weights,
                                             std::int64_t total) {
  const std::size_t n = weights.size();
  std::vector<std::int64_t> out(n, 0);
  const double sum = std::accumulate(weights.begin(), weights.end(), 0.0);
  if (n == 0 || sum <= 0) return out;
  std::int64_t given = 0;
  std::vector<double> rest(n);
  const bool at_least_one = total >= static_cast<std::int64_t>(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double exact = static_cast<double>(total) * weights[i] / sum;
    out[i] = static_cast<std::int64_t>(std::floor(exact));
    if (at_least_one && weights[i] > 0 && out[i] == 0) out[i] = 1;
    rest[i] = exact - static_cast<double>(out[i]);
    given += out[i];
  }
  // Too many (the at-least-one rule): take back from the largest shares, smallest remainder first.
  while (given > total) {
    std::size_t best = n;
    for (std::size_t i = 0; i < n; ++i)
      if (out[i] > 1 && (best == n || rest[i] < rest[best])) best = i;
    --out[best];
    rest[best] += 1;
    --given;
  }
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return rest[a] > rest[b]; });
  for (std::size_t k = 0; given < total; k = (k + 1) % n) {
    ++out[order[k]];
    ++given;
  }
  return out;
}

void set_batch_shares(std::vector<plan::Replica>& replicas,
                      const std::vector<std::int64_t>& samples) {
  std::int64_t total = 0;
  for (auto s : samples) total += s;
  std::vector<plan::Replica> kept;
  for (std::size_t i = 0; i < replicas.size(); ++i) {
    if (samples[i] <= 0) continue;
    plan::Replica r = replicas[i];
    r.batch_share = static_cast<double>(samples[i]) / static_cast<double>(total);
    kept.push_back(std::move(r));
  }
  replicas = std::move(kept);
}

}  // namespace hetplan::search
