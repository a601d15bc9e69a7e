#include "hetplan/plan/export.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <set>
#include <utility>

#include "export_parts.h"
#include "hetplan/plan/run_form.h"

namespace hetplan::plan {
namespace {

constexpr std::array<std::pair<Engine, const char*>, 3> kEngines{{
    {Engine::megatron, "megatron"},
    {Engine::deepspeed, "deepspeed"},
    {Engine::torchrun, "torchrun"},
}};

}  // namespace

const char* to_string(Engine e) {
  for (const auto& [engine, name] : kEngines)
    if (engine == e) return name;
  return "?";
}

std::optional<Engine> engine_from_string(std::string_view s) {
  for (const auto& [engine, name] : kEngines)
    if (s == name) return engine;
  return std::nullopt;
}

std::string engine_names() { return "megatron|deepspeed|torchrun"; }

std::vector<int> devices_node_by_node(const Plan& p, const cluster::Cluster& c) {
  const std::set<int> used = plan_devices(p);
  std::vector<int> out;
  for (const auto& node : c.nodes)
    for (int d : node.devices)
      if (used.count(d)) out.push_back(d);
  return out;
}

Result<Exported> export_plan(Engine e, const Plan& p, const model::Model& m,
                             const cluster::Cluster& c, const ExportInputs& in) {
  switch (e) {
    case Engine::megatron:
      return detail::export_megatron(p, m, c, in);
    case Engine::deepspeed:
      return detail::export_deepspeed(p, m, c, in);
    case Engine::torchrun:
      return detail::export_torchrun(p, m, c, in);
  }
  return Error{"export: unknown engine"};
}

namespace detail {

std::string join(const std::vector<int>& v, const char* sep) {
  return fmt::format("{}", fmt::join(v, sep));
}

std::string shell_quote(const std::string& text) {
  std::string out = "'";
  for (char ch : text) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

bool has_gpus(const cluster::Cluster& c) {
  return std::any_of(c.device_types.begin(), c.device_types.end(),
                     [](const cluster::DeviceType& t) { return t.vendor != "generic"; });
}

std::vector<std::string> types_without_bf16(const Plan& p, const cluster::Cluster& c) {
  std::set<int> types;
  for (int d : plan_devices(p)) types.insert(c.devices[static_cast<std::size_t>(d)].type);
  std::vector<std::string> out;
  for (int t : types) {
    const cluster::DeviceType& type = c.device_types[static_cast<std::size_t>(t)];
    if (!type.has_bf16())
      out.push_back(
          fmt::format("{} ({})", type.name, cluster::architecture_name(type.architecture)));
  }
  return out;
}

model::DType engine_dtype(const Plan& p, const model::Model& m, const cluster::Cluster& c,
                          const std::string& engine, std::vector<std::string>& differences) {
  if (m.dtype == model::DType::tf32) {
    differences.push_back(fmt::format(
        "precision tf32: {} trains fp32 with PyTorch's default of no TF32 matmuls; written: fp32 "
        "(set torch.backends.cuda.matmul.allow_tf32 or NVIDIA_TF32_OVERRIDE=1 for the plan's "
        "time)",
        engine));
    return model::DType::fp32;
  }
  if (m.dtype != model::DType::bf16) return m.dtype;
  const auto lacking = types_without_bf16(p, c);
  if (lacking.empty()) return m.dtype;
  differences.push_back(fmt::format(
      "bf16: {} {} no BF16 arithmetic; {} is written for fp16 mixed precision with dynamic loss "
      "scaling (hetplan prices either 16-bit type at the same rate)",
      fmt::join(lacking, ", "), lacking.size() == 1 ? "has" : "have", engine));
  return model::DType::fp16;
}

std::vector<LaunchNode> launch_nodes(const std::vector<int>& rank_devices,
                                     const cluster::Cluster& c) {
  std::vector<LaunchNode> out;
  std::set<int> seen;
  for (int d : rank_devices) {
    const int node = c.devices[static_cast<std::size_t>(d)].node;
    if (out.empty() || out.back().node != node) {
      if (!seen.insert(node).second) return {};  // this node's ranks are not consecutive
      out.push_back({node, {}});
    }
    out.back().devices.push_back(d);
  }
  return out;
}

std::vector<LaunchNode> placed_launch_nodes(const std::vector<int>& rank_devices,
                                            const cluster::Cluster& c, const std::string& engine,
                                            std::vector<std::string>& differences) {
  if (auto nodes = launch_nodes(rank_devices, c); !nodes.empty()) return nodes;
  differences.push_back(fmt::format(
      "the plan places a node's devices in non-consecutive {} ranks (tp fastest, then dp, then "
      "pp); written: ranks in the devices' node order, which moves some groups to other devices",
      engine));
  std::vector<int> sorted = rank_devices;
  std::sort(sorted.begin(), sorted.end(), [&](int a, int b) {
    const auto &da = c.devices[static_cast<std::size_t>(a)],
               &db = c.devices[static_cast<std::size_t>(b)];
    return std::pair(da.node, da.local_rank) < std::pair(db.node, db.local_rank);
  });
  return launch_nodes(sorted, c);
}

std::string plan_title(const Plan& p, const model::Model& m, const cluster::Cluster& c) {
  return one_line(fmt::format("the {} plan for {} on {}", p.planner,
                              p.model.empty() ? m.name : p.model,
                              p.cluster.empty() ? c.name : p.cluster));
}

std::string one_line(std::string text) {
  for (char& ch : text)
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) ch = ' ';
  return text;
}

std::string differences_comment(const std::vector<std::string>& differences) {
  if (differences.empty()) return "# It realises the plan as written.\n";
  std::string s = "# What the engine cannot express of the plan:\n";
  for (const auto& d : differences) s += fmt::format("#   - {}\n", one_line(d));
  return s;
}

std::string launch_preamble(const std::string& what, const std::vector<std::string>& differences,
                            const std::vector<LaunchNode>& nodes, const cluster::Cluster& c,
                            int master_port) {
  std::string s = "#!/usr/bin/env bash\n";
  s += fmt::format("# {}\n", one_line(what));
  s += differences_comment(differences);
  const int n = static_cast<int>(nodes.size());
  if (n == 1)
    s += "# Run it on the node: bash THIS_SCRIPT\n";
  else
    s += fmt::format(
        "# Run it on each of the {} nodes: NODE_RANK=<0..{}> MASTER_ADDR=<node 0's address> "
        "bash THIS_SCRIPT\n",
        n, n - 1);
  s += "set -euo pipefail\n";
  s += fmt::format("NNODES={}\n", n);
  s += n == 1 ? "NODE_RANK=\"${NODE_RANK:-0}\"\n"
              : "NODE_RANK=\"${NODE_RANK:?set NODE_RANK to this node's rank, 0 to NNODES-1}\"\n";
  s += n == 1 ? "MASTER_ADDR=\"${MASTER_ADDR:-127.0.0.1}\"\n"
              : "MASTER_ADDR=\"${MASTER_ADDR:?set MASTER_ADDR to node 0's address}\"\n";
  s += fmt::format("MASTER_PORT=\"${{MASTER_PORT:-{}}}\"\n", master_port);
  s += "TORCHRUN=\"${TORCHRUN:-torchrun}\"  # or: python3 -m torch.distributed.run\n";
  s += "case \"$NODE_RANK\" in\n";
  for (int i = 0; i < n; ++i) {
    const auto& ln = nodes[static_cast<std::size_t>(i)];
    std::vector<int> local;
    for (int d : ln.devices) local.push_back(c.devices[static_cast<std::size_t>(d)].local_rank);
    const auto& first = c.devices[static_cast<std::size_t>(ln.devices.front())];
    // Device names are "group/node/local": the node's is the part before the last '/'.
    s += fmt::format("  {}) NPROC={}; export CUDA_VISIBLE_DEVICES={} ;;  # node {}: {} x {}\n", i,
                     ln.devices.size(), join(local, ","),
                     first.name.substr(0, first.name.rfind('/')), ln.devices.size(),
                     static_cast<std::size_t>(first.type) < c.device_types.size()
                         ? c.device_types[static_cast<std::size_t>(first.type)].name
                         : std::string("device"));
  }
  s += fmt::format(
      "  *) echo \"NODE_RANK: expected 0 to {}, got $NODE_RANK\" >&2; exit 2 ;;\nesac\n", n - 1);
  return s;
}

std::string torchrun_arguments() {
  return "$TORCHRUN --nnodes \"$NNODES\" --node_rank \"$NODE_RANK\" --nproc_per_node \"$NPROC\" "
         "\\\n  --master_addr \"$MASTER_ADDR\" --master_port \"$MASTER_PORT\"";
}

}  // namespace detail
}  // namespace hetplan::plan
