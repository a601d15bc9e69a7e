// hetplan models | devices | clusters | check-cluster: what is built in, and cluster validation.
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "hetplan/cluster/cluster_file.h"
#include "hetplan/cluster/device_type.h"
#include "hetplan/core/quantity_parse.h"
#include "hetplan/model/zoo.h"

namespace hetplan::cli {
namespace {

void print_json(const nlohmann::ordered_json& j) { std::fputs((j.dump(2) + "\n").c_str(), stdout); }

nlohmann::ordered_json model_json(const model::Model& m) {
  nlohmann::ordered_json j;
  j["name"] = m.name;
  j["family"] = model::to_string(m.family);
  j["parameters"] = m.parameters();
  j["forward_flops_per_sample"] = m.forward_flops_per_sample();
  j["dtype"] = model::to_string(m.dtype);
  j["seq_len"] = m.seq_len;
  j["hidden"] = m.hidden;
  j["heads"] = m.heads;
  j["kv_heads"] = m.kv_heads;
  j["ffn_hidden"] = m.ffn_hidden;
  j["blocks"] = m.num_blocks;
  j["vocab"] = m.vocab;
  j["experts"] = m.experts;
  j["top_k"] = m.top_k;
  j["num_ops"] = m.ops.size();
  j["num_layers"] = m.layers.size();
  return j;
}

}  // namespace

Action add_models_command(CLI::App& app) {
  auto name = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand("models", "List the built-in models, or describe one");
  cmd->add_option("name", *name, "A preset name or family spec to describe");
  cmd->add_flag("--json", *json, "Print JSON");
  return [name, json] {
    if (!name->empty()) {
      auto m = model::load_model(*name, "models NAME");
      if (!m) return report_error(m.error().message);
      if (*json) {
        print_json(model_json(*m));
      } else {
        fmt::print(
            "{}: {} model, {:.4g}B parameters, {:.4g} GFLOP forward per sample, {} ops in {} "
            "layers\n",
            m->name, model::to_string(m->family), static_cast<double>(m->parameters()) / 1e9,
            m->forward_flops_per_sample() / 1e9, m->ops.size(), m->layers.size());
      }
      return 0;
    }
    if (*json) {
      auto arr = nlohmann::ordered_json::array();
      for (const auto& p : model::presets())
        arr.push_back({{"name", p.name},
                       {"spec", p.spec},
                       {"description", p.description},
                       {"published_parameters", p.published_parameters}});
      print_json(arr);
      return 0;
    }
    fmt::print("{:<16} {:>10}  {}\n", "preset", "params", "description");
    for (const auto& p : model::presets())
      fmt::print("{:<16} {:>9.3g}B  {}\n", p.name, p.published_parameters / 1e9, p.description);
    fmt::print(
        "\nFamilies by spec: gpt, llama, bert, vit, moe, resnet, vgg, inception, mlp "
        "(e.g. gpt:layers=24,hidden=2304,heads=24,seq=2048,vocab=51200)\n");
    return 0;
  };
}

Action add_devices_command(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand("devices", "List the device catalog");
  cmd->add_flag("--json", *json, "Print JSON");
  return [json] {
    if (*json) {
      auto arr = nlohmann::ordered_json::array();
      for (const auto& d : cluster::device_catalog())
        arr.push_back({{"name", d.name},
                       {"aliases", d.aliases},
                       {"vendor", d.vendor},
                       {"architecture", cluster::architecture_name(d.architecture)},
                       {"bf16", d.has_bf16()},
                       {"peak_fp16_flops", d.peak_fp16.value},
                       {"peak_fp32_flops", d.peak_fp32.value},
                       {"peak_tf32_flops", d.peak_tf32.value},
                       {"memory_bytes", d.memory.value},
                       {"memory_bandwidth_bytes_per_s", d.memory_bandwidth.value},
                       {"source", d.source},
                       {"price_per_hour_usd", d.price_per_hour.value > 0
                                                  ? nlohmann::ordered_json(d.price_per_hour.value)
                                                  : nlohmann::ordered_json(nullptr)},
                       {"price_source", d.price_source}});
      print_json(arr);
      return 0;
    }
    fmt::print("{:<18} {:<8} {:>14} {:>14} {:>14} {:>12} {:>12} {:>10}\n", "device", "arch",
               "fp16/bf16", "tf32", "fp32", "memory", "mem bw", "$/GPU-h");
    for (const auto& d : cluster::device_catalog())
      fmt::print("{:<18} {:<8} {:>14} {:>14} {:>14} {:>12} {:>12} {:>10}\n", d.name,
                 cluster::architecture_name(d.architecture), format_flops_rate(d.peak_fp16),
                 d.peak_tf32.value > 0 ? format_flops_rate(d.peak_tf32) : std::string("-"),
                 format_flops_rate(d.peak_fp32), format_bytes(d.memory),
                 format_bandwidth(d.memory_bandwidth),
                 d.price_per_hour.value > 0 ? fmt::format("{:.3g}", d.price_per_hour.value)
                                            : std::string("-"));
    return 0;
  };
}

Action add_clusters_command(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  auto show = std::make_shared<std::string>();
  auto* cmd =
      app.add_subcommand("clusters", "List the built-in cluster presets, or print one as YAML");
  cmd->add_option("name", *show, "A preset to print as YAML (to copy and edit)");
  cmd->add_flag("--json", *json, "Print JSON");
  return [json, show] {
    if (!show->empty()) {
      const std::string yaml = cluster::preset_yaml(*show);
      if (yaml.empty())
        return report_error(fmt::format("clusters NAME: unknown preset '{}'", *show));
      std::fputs(yaml.c_str(), stdout);
      return 0;
    }
    if (*json) {
      auto arr = nlohmann::ordered_json::array();
      for (const auto& p : cluster::cluster_presets())
        arr.push_back({{"name", p.name}, {"description", p.description}});
      print_json(arr);
      return 0;
    }
    for (const auto& p : cluster::cluster_presets())
      fmt::print("{:<18} {}\n", p.name, p.description);
    return 0;
  };
}

Action add_check_cluster_command(CLI::App& app) {
  auto file = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("check-cluster",
                                 "Validate a cluster file (or preset) and print its summary");
  cmd->add_option("file", *file, "Cluster YAML file or preset name")->required();
  return [file] {
    auto c = cluster::load_cluster(*file, "check-cluster");
    if (!c) return report_error(c.error().message);
    std::fputs(cluster::summarize(*c).c_str(), stdout);
    return 0;
  };
}

}  // namespace hetplan::cli
