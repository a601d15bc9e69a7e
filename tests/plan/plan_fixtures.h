// Tiny hand-built models and clusters for the plan tests (no zoo, no cluster files).
#pragma once

#include <string>
#include <string_view>

#include "hetplan/cluster/cluster.h"
#include "hetplan/model/model.h"
#include "hetplan/plan/plan.h"

namespace hetplan::plan::testing {

// A decoder LM laid out as [embedding, layers.0 .. layers.{blocks-1}, head], a few ops per layer
// named as the zoo's GPT builder names them.
inline model::Model tiny_gpt(int blocks, int heads = 8, int kv_heads = 8, int experts = 0) {
  model::Model m;
  m.name = "tiny-gpt";
  m.heads = heads;
  m.kv_heads = kv_heads;
  m.experts = experts;
  m.num_blocks = blocks;
  m.hidden = 64 * heads;
  auto add_layer = [&](const std::string& name, model::LayerKind kind,
                       std::initializer_list<const char*> ops) {
    model::Layer l;
    l.name = name;
    l.kind = kind;
    l.first_op = static_cast<int>(m.ops.size());
    for (const char* op : ops) {
      model::Op o;
      o.name = name + "." + op;
      o.layer = static_cast<int>(m.layers.size());
      const std::string_view n = op;
      if (n == "attn.qkv" || n == "mlp.fc1") o.shard = model::ShardKind::column;
      if (n == "attn.proj" || n == "mlp.fc2") o.shard = model::ShardKind::row;
      m.ops.push_back(o);
    }
    l.num_ops = static_cast<int>(ops.size());
    m.layers.push_back(l);
  };
  add_layer("embedding", model::LayerKind::embedding, {"word", "position"});
  for (int b = 0; b < blocks; ++b)
    add_layer("layers." + std::to_string(b), model::LayerKind::transformer,
              {"norm1", "attn.qkv", "attn.proj", "norm2", "mlp.fc1", "mlp.fc2"});
  add_layer("head", model::LayerKind::head, {"norm", "lm", "loss"});
  return m;
}

// A CNN-like model of `count` conv blocks and no transformer layers.
inline model::Model tiny_cnn(int count) {
  model::Model m;
  m.name = "tiny-cnn";
  m.family = model::Family::cnn;
  for (int i = 0; i < count; ++i) {
    model::Layer l;
    l.name = "block" + std::to_string(i);
    l.kind = i + 1 == count ? model::LayerKind::head : model::LayerKind::conv_block;
    l.first_op = i;
    l.num_ops = 1;
    model::Op o;
    o.name = l.name + ".conv";
    o.layer = i;
    m.ops.push_back(o);
    m.layers.push_back(l);
  }
  return m;
}

// `devices` devices, `per_node` to a node.
inline cluster::Cluster tiny_cluster(int devices, int per_node = 8) {
  cluster::Cluster c;
  c.name = "tiny-cluster";
  c.device_types.push_back(*cluster::find_device_type("cpu"));  // every device's type 0
  for (int d = 0; d < devices; ++d) {
    if (d % per_node == 0) {
      cluster::Node n;
      n.id = static_cast<int>(c.nodes.size());
      n.group = "g";
      c.nodes.push_back(n);
    }
    cluster::Device dev;
    dev.id = d;
    dev.node = static_cast<int>(c.nodes.size()) - 1;
    dev.local_rank = d % per_node;
    dev.name = "g/" + std::to_string(dev.node) + "/" + std::to_string(dev.local_rank);
    c.nodes.back().devices.push_back(d);
    c.devices.push_back(dev);
  }
  return c;
}

// Two stages over a tiny_gpt(4) (6 layers) on 8 devices: stage 0 (embedding + 2 blocks) on two
// uneven tensor-parallel pairs, stage 1 (2 blocks + head) on four devices in one replica.
inline Plan two_stage_plan() {
  Plan p;
  p.model = "tiny-gpt";
  p.cluster = "tiny-cluster";
  p.planner = "hand";
  p.global_batch = 16;
  p.num_microbatches = 4;
  Stage s0;
  s0.first_layer = 0;
  s0.num_layers = 3;
  s0.replicas = {Replica{{0, 1}, {0.6, 0.4}, 0.5}, Replica{{2, 3}, {}, 0.5}};
  Stage s1;
  s1.first_layer = 3;
  s1.num_layers = 3;
  s1.replicas = {Replica{{4, 5, 6, 7}, {0.3, 0.3, 0.2, 0.2}, 1.0}};
  p.stages = {s0, s1};
  return p;
}

}  // namespace hetplan::plan::testing
