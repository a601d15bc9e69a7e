// hetplan groups: a model's ops coarsened into groups with METIS (search/op_groups.h), as the
// op-level planners see them: each group's ops, compute time per sample and parameters, and the
// bytes per sample on edges between groups.
#include <fmt/format.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "hetplan/cluster/device_type.h"
#include "hetplan/core/quantity_parse.h"
#include "hetplan/cost/compute_cost.h"
#include "hetplan/model/zoo.h"
#include "hetplan/search/op_groups.h"

namespace hetplan::cli {
namespace {

constexpr const char* kDefaultDevice = "A100-SXM4-80GB";

struct GroupsArgs {
  std::string model;
  int groups = 0;  // read only when --groups was given
  std::uint64_t seed = 0;
  std::string device = kDefaultDevice;
  bool json = false;
};

int run_groups(const GroupsArgs& a, bool groups_given) {
  auto m = model::load_model(a.model, "--model");
  if (!m) return report_error(m.error().message);
  if (groups_given && a.groups < 1)
    return report_error(fmt::format("--groups: expected at least 1 group, got {}", a.groups));
  const auto dev = cluster::find_device_type(a.device);
  if (!dev)
    return report_error(
        fmt::format("--device: unknown device type '{}' (see 'hetplan devices')", a.device));
  const int k = groups_given ? a.groups : search::default_group_count(*m);
  const cost::ComputeCostModel cost(cost::ComputeParams::defaults());
  const std::vector<double> weight = search::op_compute_weights(*m, *dev, cost);
  auto g = search::group_ops(*m, weight, k, a.seed);
  if (!g) return report_error(g.error().message);
  const double cut = search::cut_bytes(*m, *g);

  struct Summary {
    double seconds = 0;
    std::int64_t params = 0;
  };
  std::vector<Summary> sums(g->groups.size());
  for (std::size_t gi = 0; gi < g->groups.size(); ++gi)
    for (int op : g->groups[gi]) {
      sums[gi].seconds += weight[op];
      sums[gi].params += m->ops[op].params;
    }

  if (a.json) {
    nlohmann::ordered_json j;
    j["model"] = m->name;
    j["num_ops"] = m->ops.size();
    j["requested_groups"] = k;
    j["num_groups"] = g->groups.size();
    j["seed"] = a.seed;
    j["device"] = dev->name;
    j["cut_bytes_per_sample"] = cut;
    auto arr = nlohmann::ordered_json::array();
    for (std::size_t gi = 0; gi < g->groups.size(); ++gi) {
      auto names = nlohmann::ordered_json::array();
      for (int op : g->groups[gi]) names.push_back(m->ops[op].name);
      arr.push_back({{"id", gi},
                     {"num_ops", g->groups[gi].size()},
                     {"ops", std::move(names)},
                     {"compute_s_per_sample", sums[gi].seconds},
                     {"params", sums[gi].params}});
    }
    j["groups"] = std::move(arr);
    std::fputs((j.dump(2) + "\n").c_str(), stdout);
    return 0;
  }
  fmt::print(
      "{}: {} ops in {} groups (asked {}, seed {}), compute on {}; {} per sample between "
      "groups\n",
      m->name, m->ops.size(), g->groups.size(), k, a.seed, dev->name, format_bytes(Bytes(cut)));
  fmt::print("{:>5} {:>5}  {:<60} {:>10} {:>12}\n", "group", "ops", "first .. last op", "fwd+bwd",
             "params");
  for (std::size_t gi = 0; gi < g->groups.size(); ++gi) {
    const auto& ops = g->groups[gi];
    const std::string span = ops.size() == 1 ? m->ops[ops.front()].name
                                             : fmt::format("{} .. {}", m->ops[ops.front()].name,
                                                           m->ops[ops.back()].name);
    fmt::print("{:>5} {:>5}  {:<60} {:>10} {:>12}\n", gi, ops.size(), span,
               format_duration(Seconds(sums[gi].seconds)), sums[gi].params);
  }
  return 0;
}

}  // namespace

Action add_groups_command(CLI::App& app) {
  auto args = std::make_shared<GroupsArgs>();
  auto* cmd = app.add_subcommand(
      "groups", "Coarsen a model's ops into groups with METIS (for op-level planners)");
  cmd->add_option("--model,-m", args->model,
                  "Model: preset name, family spec (resnet:depth=50) or graph .json")
      ->required();
  auto* groups = cmd->add_option(
      "--groups,-k", args->groups,
      "Number of groups (default: 2*sqrt(ops) within [8, 64], at most the op count)");
  cmd->add_option("--seed", args->seed, "METIS's random seed")
      ->check([](const std::string& s) {
        // An unsigned option would take "-1" as 2^64 - 1.
        return s.find('-') == std::string::npos ? std::string()
                                                : "expected an integer >= 0, got " + s;
      })
      ->capture_default_str();
  cmd->add_option("--device", args->device,
                  "Device type whose compute times weigh the ops (see 'hetplan devices')")
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "Print JSON");
  return [args, groups] { return run_groups(*args, groups->count() > 0); };
}

}  // namespace hetplan::cli
