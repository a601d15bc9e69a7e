// The readable summary printed by `hetplan check-cluster`.
#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "hetplan/cluster/cluster_file.h"
#include "hetplan/core/quantity_parse.h"
#include "hetplan/core/units.h"

namespace hetplan::cluster {
namespace {

std::string group_line(const Cluster& c, const NodeGroup& g) {
  const std::string per_node = format_bandwidth(g.nic_bandwidth * static_cast<double>(g.nic_count));
  const double per_device_share = std::max(1.0, static_cast<double>(g.nic_count) / g.devices_per_node);
  std::string line = fmt::format(
      "  {}: {} node{} x {} {}; intra-node {} ({}); NICs {} x {} = {} per node, {} per device ({})",
      g.name, g.count, g.count == 1 ? "" : "s", g.devices_per_node,
      c.device_types[g.device_type].name, format_bandwidth(g.intra_bandwidth),
      format_duration(g.intra_latency), g.nic_count, format_bandwidth(g.nic_bandwidth), per_node,
      format_bandwidth(g.nic_bandwidth * per_device_share), format_duration(g.nic_latency));
  if (c.network == NetworkKind::fat_tree)
    line += fmt::format("; fat-tree uplink {}",
                        format_bandwidth(g.nic_bandwidth * (g.nic_count / c.oversubscription)));
  if (g.cpu_share != 1.0) line += fmt::format("; cpu share {:g}", g.cpu_share);
  return line + "\n";
}

// "leaf-spine: 4 leaves of up to 2 nodes, 2 spines; each leaf -> spine link 3.12 GB/s": the
// uplinks differ from leaf to leaf when their nodes' NICs do.
std::string leaf_spine_line(const Cluster& c) {
  const LeafSpine& ls = c.leaf_spine;
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  for (int l : ls.up) {
    lo = std::min(lo, c.links[l].bandwidth.value);
    hi = std::max(hi, c.links[l].bandwidth.value);
  }
  std::string uplink = format_bandwidth(BytesPerSecond(lo));
  if (hi > lo) uplink += " to " + format_bandwidth(BytesPerSecond(hi));
  return fmt::format(
      "leaf-spine: {} lea{} of up to {} node{}, {} spine{}; each leaf <-> spine link {}\n",
      ls.leaves(), ls.leaves() == 1 ? "f" : "ves", ls.nodes_per_leaf,
      ls.nodes_per_leaf == 1 ? "" : "s", ls.spines, ls.spines == 1 ? "" : "s", uplink);
}

// "background load (cross traffic): 0.3 on 56 of 96 directed links"; empty without any.
std::string background_line(const Cluster& c) {
  int loaded = 0;
  double lo = 1, hi = 0;
  for (const Link& l : c.links) {
    if (l.background_load <= 0) continue;
    ++loaded;
    lo = std::min(lo, l.background_load);
    hi = std::max(hi, l.background_load);
  }
  if (loaded == 0) return "";
  const std::string range = hi > lo ? fmt::format("{:g} to {:g}", lo, hi) : fmt::format("{:g}", lo);
  return fmt::format("background load (cross traffic): {} on {} of {} directed links\n", range,
                     loaded, c.links.size());
}

// Decimal units, as the data sheets (and the catalog) state memory: "80 GB", "2.56 TB".
std::string decimal_bytes(Bytes b) {
  if (b.value >= 1e12) return fmt::format("{:.3g} TB", b.value / 1e12);
  return fmt::format("{:.4g} GB", b.value / 1e9);
}

}  // namespace

std::string summarize(const Cluster& c) {
  std::string out = fmt::format("cluster {}: {} devices in {} nodes, network: {}", c.name,
                                c.num_devices(), c.nodes.size(), to_string(c.network));
  if (c.network == NetworkKind::fat_tree || c.network == NetworkKind::leaf_spine)
    out += fmt::format(" (oversubscription {:g})", c.oversubscription);
  out += "\n";
  if (c.network == NetworkKind::leaf_spine) out += leaf_spine_line(c);
  out += background_line(c);

  if (!c.groups.empty()) {
    out += "node groups:\n";
    for (const NodeGroup& g : c.groups) out += group_line(c, g);
  } else {
    int switches = 0;
    for (const Vertex& v : c.vertices) switches += v.kind != VertexKind::device;
    double lo = std::numeric_limits<double>::infinity(), hi = 0;
    for (const Link& l : c.links) {
      lo = std::min(lo, l.bandwidth.value);
      hi = std::max(hi, l.bandwidth.value);
    }
    out += fmt::format("explicit topology: {} switches, {} directed links", switches, c.links.size());
    if (!c.links.empty())
      out += fmt::format(", {} to {} per link", format_bandwidth(BytesPerSecond(lo)),
                         format_bandwidth(BytesPerSecond(hi)));
    out += "\n";
  }

  out += "devices by type:\n";
  std::vector<int> count(c.device_types.size(), 0);
  for (const Device& d : c.devices) ++count[d.type];
  Bytes memory(0);
  FlopsPerSecond peak(0);
  for (std::size_t t = 0; t < c.device_types.size(); ++t) {
    const DeviceType& dt = c.device_types[t];
    const FlopsPerSecond bf16 = dt.peak(model::DType::bf16);
    // The rate 16-bit mixed precision runs at: bf16, or fp16 where the tensor cores lack bf16,
    // or the fp32 rate where the type has no usable 16-bit rate.
    const char* precision = dt.peak_fp16.value <= 0 ? "fp32 (no 16-bit rate)"
                            : dt.has_bf16()         ? "bf16"
                                                    : "fp16 (no bf16)";
    out +=
        fmt::format("  {} x {} ({}): {} memory, {} {}, {} memory bandwidth, {}\n", count[t],
                    dt.name, architecture_name(dt.architecture), decimal_bytes(dt.memory),
                    format_flops_rate(bf16), precision, format_bandwidth(dt.memory_bandwidth),
                    dt.price_per_hour.value > 0 ? fmt::format("${:.3g}/h", dt.price_per_hour.value)
                                                : std::string("no price"));
    memory += dt.memory * static_cast<double>(count[t]);
    peak += bf16 * static_cast<double>(count[t]);
  }
  out += fmt::format("total memory: {}\n", decimal_bytes(memory));
  out += fmt::format("total peak 16-bit: {:.1f} PFLOP/s\n", peak.value / 1e15);
  out += fmt::format("price: ${:.2f} per hour\n", c.price_per_hour().value);
  for (const TypeAlias& a : c.type_aliases)
    out += fmt::format("'{}' is taken to be {}\n", a.written, a.canonical);
  return out;
}

}  // namespace hetplan::cluster
