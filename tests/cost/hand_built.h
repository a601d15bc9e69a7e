// Small models and clusters built by hand, so the cost tests depend only on the plain structs.
#pragma once

#include <string>
#include <vector>

#include "hetplan/cluster/cluster.h"
#include "hetplan/model/model.h"

namespace hetplan::cost::testing {

struct TwoLevelSpec {
  int nodes = 2;
  int devices_per_node = 2;
  double intra_bandwidth = 100e9;  // device <-> node switch, per direction
  double intra_latency = 1e-6;
  double nic_bandwidth = 10e9;     // per NIC, per direction
  double nic_latency = 5e-6;       // NIC <-> network switch
  // false: one NIC per node behind the node switch; true: one NIC per device ("rails"), linked to
  // its device directly.
  bool rails = false;
};

// Devices, then per node a node switch and its NIC(s), then one network switch. Every physical
// link is two directed links. The node switch <-> NIC links (rails = false) have the NIC's
// bandwidth and no latency.
inline cluster::Cluster two_level_cluster(const TwoLevelSpec& s) {
  using cluster::VertexKind;
  cluster::Cluster c;
  c.name = "hand-built";
  cluster::DeviceType t;
  t.name = "FAKE-GPU";
  t.peak_fp16 = FlopsPerSecond(100e12);
  t.peak_fp32 = FlopsPerSecond(10e12);
  t.memory = Bytes(16e9);
  t.memory_bandwidth = BytesPerSecond(1e12);
  c.device_types.push_back(t);
  const int n = s.nodes * s.devices_per_node;
  for (int d = 0; d < n; ++d) {
    cluster::Device dev;
    dev.id = d;
    dev.node = d / s.devices_per_node;
    dev.local_rank = d % s.devices_per_node;
    dev.name = "g" + std::to_string(d);
    c.devices.push_back(dev);
    c.vertices.push_back({VertexKind::device, dev.name});
  }
  auto add_vertex = [&](VertexKind k, const std::string& name) {
    c.vertices.push_back({k, name});
    return static_cast<int>(c.vertices.size()) - 1;
  };
  auto link = [&](int a, int b, double bw, double lat) {
    for (auto [from, to] : {std::pair{a, b}, std::pair{b, a}}) {
      cluster::Link l;
      l.from = from;
      l.to = to;
      l.bandwidth = BytesPerSecond(bw);
      l.latency = Seconds(lat);
      l.name = c.vertices[from].name + "->" + c.vertices[to].name;
      c.links.push_back(l);
    }
  };
  std::vector<int> switches, nics;
  for (int node = 0; node < s.nodes; ++node) {
    cluster::Node nd;
    nd.id = node;
    nd.group = "g";
    for (int l = 0; l < s.devices_per_node; ++l) nd.devices.push_back(node * s.devices_per_node + l);
    c.nodes.push_back(nd);
    switches.push_back(add_vertex(VertexKind::node_switch, "sw" + std::to_string(node)));
    if (s.rails) {
      for (int l = 0; l < s.devices_per_node; ++l)
        nics.push_back(add_vertex(VertexKind::nic, "nic" + std::to_string(node) + "." + std::to_string(l)));
    } else {
      nics.push_back(add_vertex(VertexKind::nic, "nic" + std::to_string(node)));
    }
  }
  const int core = add_vertex(VertexKind::network_switch, "core");
  for (int d = 0; d < n; ++d) link(d, switches[c.devices[d].node], s.intra_bandwidth, s.intra_latency);
  if (s.rails) {
    for (int d = 0; d < n; ++d) link(d, nics[d], s.nic_bandwidth, 0);
  } else {
    for (int node = 0; node < s.nodes; ++node) link(switches[node], nics[node], s.nic_bandwidth, 0);
  }
  for (int nic : nics) link(nic, core, s.nic_bandwidth, s.nic_latency);
  c.out_links.assign(c.vertices.size(), {});
  for (int l = 0; l < static_cast<int>(c.links.size()); ++l) c.out_links[c.links[l].from].push_back(l);
  return c;
}

// A GPT-like model: `blocks` transformer layers whose ops save, per sample, the activations of
// Korthikanti et al. 2022 (16-bit, 1-byte dropout masks): 34 s h + 5 a s^2 bytes per layer, of which
// 10 s h on replicated ops (layernorm inputs and outputs, the two dropout masks after the row-parallel
// GEMMs), 24 s h on column/row/heads-sharded ops, and 5 a s^2 on the attention core.
// Every layer has 12 h^2 + 13 h parameters. The layer's first op reads its 2 s h input.
inline model::Model gpt_like(int blocks, int seq, int hidden, int heads) {
  using model::OpKind;
  using model::ShardKind;
  model::Model m;
  m.name = "gpt-like";
  m.dtype = model::DType::bf16;
  m.seq_len = seq;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = heads;
  m.ffn_hidden = 4 * hidden;
  m.num_blocks = blocks;
  const double s = seq, h = hidden, a = heads;
  const double sh = s * h, ass = a * s * s;
  const std::int64_t H = hidden;
  struct Spec {
    const char* name;
    OpKind kind;
    ShardKind shard;
    double saved;
    std::int64_t params;
    bool core;
  };
  const std::vector<Spec> specs = {
      {"ln1", OpKind::layernorm, ShardKind::replicated, 4 * sh, 2 * H, false},  // input + output
      {"qkv", OpKind::matmul, ShardKind::column, 6 * sh, 3 * H * H + 3 * H, false},  // Q, K, V
      {"scores", OpKind::batched_matmul, ShardKind::heads, 0, 0, true},
      {"softmax", OpKind::softmax, ShardKind::heads, 2 * ass, 0, true},
      {"attn_dropout", OpKind::elementwise, ShardKind::heads, 3 * ass, 0, true},  // mask + output
      {"context", OpKind::batched_matmul, ShardKind::heads, 0, 0, true},
      {"proj", OpKind::matmul, ShardKind::row, 2 * sh, H * H + H, false},
      {"proj_dropout", OpKind::elementwise, ShardKind::replicated, sh, 0, false},  // mask
      {"ln2", OpKind::layernorm, ShardKind::replicated, 4 * sh, 2 * H, false},
      {"fc1", OpKind::matmul, ShardKind::column, 0, 4 * H * H + 4 * H, false},
      {"gelu", OpKind::elementwise, ShardKind::column, 8 * sh, 0, false},  // its input
      {"fc2", OpKind::matmul, ShardKind::row, 8 * sh, 4 * H * H + H, false},  // its input
      {"mlp_dropout", OpKind::elementwise, ShardKind::replicated, sh, 0, false},  // mask
  };
  for (int b = 0; b < blocks; ++b) {
    model::Layer layer;
    layer.name = "layers." + std::to_string(b);
    layer.kind = model::LayerKind::transformer;
    layer.first_op = static_cast<int>(m.ops.size());
    for (const Spec& sp : specs) {
      model::Op op;
      op.name = layer.name + "." + sp.name;
      op.kind = sp.kind;
      op.shard = sp.shard;
      op.layer = b;
      if (!m.ops.empty()) op.inputs = {static_cast<int>(m.ops.size()) - 1};
      op.saved_bytes = sp.saved;
      op.params = sp.params;
      op.attention_core = sp.core;
      op.bytes_read = 2 * sh;
      op.bytes_written = 2 * sh;
      m.ops.push_back(op);
    }
    layer.num_ops = static_cast<int>(specs.size());
    m.layers.push_back(layer);
  }
  return m;
}

}  // namespace hetplan::cost::testing
