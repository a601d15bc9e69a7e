// Small hand-made models and clusters whose simulated times can be worked out by hand.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hetplan/cluster/cluster_file.h"
#include "hetplan/cost/collective_cost.h"
#include "hetplan/model/model.h"
#include "hetplan/sim/simulate.h"

namespace hetplan::sim::testing {

// A chain of `layers` layers, each one matmul op of `flops` FLOPs per sample that writes
// `out_bytes` per sample and has `params` parameters.
inline model::Model chain_model(int layers, double flops, double out_bytes,
                                std::int64_t params = 0) {
  model::Model m;
  m.name = "chain";
  m.family = model::Family::cnn;
  for (int i = 0; i < layers; ++i) {
    model::Op op;
    op.name = "layers." + std::to_string(i) + ".fc";
    op.kind = model::OpKind::matmul;
    op.shard = model::ShardKind::column;
    op.layer = i;
    if (i > 0) op.inputs = {i - 1};
    op.flops = flops;
    op.bytes_written = out_bytes;
    op.params = params;
    m.ops.push_back(op);
    m.layers.push_back(model::Layer{"layers." + std::to_string(i), model::LayerKind::other, i, 1});
  }
  return m;
}

// `nodes` nodes of `per_node` devices of 1 TFLOP/s (fp16 and fp32), intra-node 100 GB/s,
// one NIC of `nic` per node; latencies 2 us inside a node and 10 us through the NIC, or none.
inline cluster::Cluster unit_cluster(int nodes, int per_node, const std::string& nic = "8Gbps",
                                     bool latencies = true) {
  const std::string yaml =
      "version: 1\n"
      "device_types:\n"
      "  - {name: unit, peak_fp16: 1TFLOPS, peak_fp32: 1TFLOPS, memory: 16GB,"
      " memory_bandwidth: 1000GB/s}\n"
      "nodes:\n"
      "  - group: g\n"
      "    count: " +
      std::to_string(nodes) +
      "\n"
      "    device: unit\n"
      "    devices_per_node: " +
      std::to_string(per_node) +
      "\n"
      "    intra_node: {bandwidth: 100GB/s, latency: " +
      (latencies ? "2us" : "0us") +
      "}\n"
      "    nic: {bandwidth: " +
      nic + ", count: 1, latency: " + (latencies ? "10us" : "0us") + "}\n";
  auto c = cluster::parse_cluster_yaml(yaml, "unit.yaml");
  if (!c) throw std::runtime_error(c.error().message);
  return *c;
}

// Exact arithmetic: GEMMs at peak, memory at full bandwidth, no launch or host costs, links at
// full rate.
inline SimOptions exact_options() {
  SimOptions o;
  o.compute.gemm_peak_efficiency = 1.0;
  o.compute.gemm_half_size_time = Seconds(0);
  o.compute.memory_efficiency = 1.0;
  o.compute.kernel_launch = Seconds(0);
  o.compute.host_forward_op = Seconds(0);
  o.compute.host_backward_op = Seconds(0);
  o.compute.iteration_host = Seconds(0);
  o.network.intra_node_efficiency = 1.0;
  o.network.inter_node_efficiency = 1.0;
  o.network.collective_launch = Seconds(0);
  o.network.protocols = false;  // Simple alone: the textbook alpha-beta times
  o.record_events = true;
  return o;
}

// Seconds of a collective over `devices` of c on exact_options()'s network (what the simulator
// should charge for it when it has its links to itself).
inline double collective_time(const cluster::Cluster& c, cost::Collective kind,
                              std::vector<int> devices, double bytes,
                              std::vector<double> shares = {},
                              std::optional<cost::UnevenForm> form = std::nullopt) {
  cost::CollectiveRequest req;
  req.kind = kind;
  req.devices = std::move(devices);
  req.bytes = Bytes(bytes);
  req.shares = std::move(shares);
  req.uneven_form = form;
  return cost::collective_cost(c, req, exact_options().network).time.value;
}

}  // namespace hetplan::sim::testing
