#include "validate_op_groups.h"

#include <fmt/format.h>

#include <cmath>
#include <unordered_map>

#include "hetplan/core/error.h"
#include "hetplan/core/json_util.h"
#include "hetplan/plan/op_groups.h"

namespace hetplan::plan::detail {
namespace {

constexpr double kShareTolerance = 1e-6;

std::string group_path(std::size_t g) { return index_path("op_groups", g); }

void check_settings(const Plan& p) {
  if (!p.stages.empty())
    throw InputError("stages", "an op-level plan (with op_groups) has no stages");
  if (!p.op_overrides.empty() || !p.grad_sync.empty())
    throw InputError(p.op_overrides.empty() ? "grad_sync" : "op_overrides",
                     "an op-level plan sets its splits and synchronisation per op group");
  if (p.zero_stage != 0 && p.zero_stage != 1)
    throw InputError("zero_stage",
                     "expected 0 or 1 for an op-level plan (ZeRO-1 shards a replicated group's "
                     "optimizer states over its devices, and a split group's over its replicas; "
                     "stages 2 and 3 are not modelled there)");
  if (p.sequence_parallel)
    throw InputError("sequence_parallel", "expected false for an op-level plan");
}

void check_devices(const std::vector<int>& devices, const cluster::Cluster& c,
                   const std::string& dpath) {
  const int n = c.num_devices();
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const int d = devices[i];
    if (d < 0 || d >= n)
      throw InputError(index_path(dpath, i),
                       fmt::format("device {} does not exist (the cluster has {} devices)", d, n));
    for (std::size_t k = 0; k < i; ++k)
      if (devices[k] == d)
        throw InputError(index_path(dpath, i),
                         fmt::format("device {} appears twice (also at [{}])", d, k));
  }
}

// A split group's replicas: sizes covering its devices, one batch share per replica summing to 1
// and giving each samples, tensor shares summing to 1 within each replica; at least one replica
// splits (of several devices).
void check_replicas(const Plan& p, const OpGroup& g, const std::string& path) {
  if (g.replica_sizes.empty()) {
    if (!g.batch_shares.empty())
      throw InputError(field_path(path, "batch_shares"),
                       "expected replica_sizes with batch_shares (one share per replica)");
    check_shares(g.shares, g.devices.size(), field_path(path, "shares"));
    return;
  }
  const std::string rpath = field_path(path, "replica_sizes");
  std::size_t total = 0;
  bool splits = false;
  for (std::size_t r = 0; r < g.replica_sizes.size(); ++r) {
    const int size = g.replica_sizes[r];
    if (size < 1) throw InputError(index_path(rpath, r), "expected an integer >= 1");
    total += static_cast<std::size_t>(size);
    splits = splits || size > 1;
  }
  if (total != g.devices.size())
    throw InputError(rpath, fmt::format("expected replica sizes summing to the group's {} devices, "
                                        "got {}",
                                        g.devices.size(), total));
  if (!splits)
    throw InputError(rpath,
                     "expected a replica of at least two devices (replicas of one device each: "
                     "mode replicate)");
  check_shares(g.batch_shares, g.replica_sizes.size(), field_path(path, "batch_shares"));
  for (std::size_t r = 0; r < g.replica_sizes.size(); ++r)
    if (!(group_share(g, replica_begin(g, static_cast<int>(r))) *
              static_cast<double>(p.global_batch) / p.num_microbatches >
          0))
      throw InputError(field_path(path, "batch_shares"),
                       "expected batch shares that give every replica samples in every "
                       "micro-batch");
  if (g.shares.empty()) return;
  const std::string spath = field_path(path, "shares");
  if (g.shares.size() != g.devices.size())
    throw InputError(spath, fmt::format("expected {} shares (one per device) or none, got {}",
                                        g.devices.size(), g.shares.size()));
  for (std::size_t r = 0; r < g.replica_sizes.size(); ++r) {
    const std::size_t begin = replica_begin(g, static_cast<int>(r));
    double sum = 0;
    for (std::size_t j = begin; j < begin + static_cast<std::size_t>(g.replica_sizes[r]); ++j) {
      if (!(g.shares[j] > 0) || !std::isfinite(g.shares[j]))
        throw InputError(index_path(spath, j), "expected a number > 0");
      sum += g.shares[j];
    }
    if (std::abs(sum - 1) > kShareTolerance)
      throw InputError(spath, fmt::format("expected the shares of each replica to sum to 1; "
                                          "replica {}'s sum to {}",
                                          r, sum));
  }
}

void check_group(const Plan& p, const OpGroup& g, const cluster::Cluster& c,
                 const std::string& path) {
  if (g.ops.empty()) throw InputError(field_path(path, "ops"), "expected at least one op");
  if (g.devices.empty())
    throw InputError(field_path(path, "devices"), "expected at least one device");
  check_devices(g.devices, c, field_path(path, "devices"));
  if (g.mode == GroupMode::place) {
    if (g.devices.size() != 1)
      throw InputError(
          field_path(path, "devices"),
          fmt::format("a placed group runs on exactly one device, got {}", g.devices.size()));
    if (!g.shares.empty())
      throw InputError(field_path(path, "shares"), "a placed group has no shares");
    if (!g.servers.empty())
      throw InputError(field_path(path, "servers"), "a placed group has no parameter servers");
    return;
  }
  if (g.mode == GroupMode::split) {
    check_replicas(p, g, path);
    if (g.devices.size() < 2)
      throw InputError(field_path(path, "devices"),
                       "a split group spans at least two devices (one device: mode place)");
    if (!g.servers.empty() || g.algorithm != cost::Algorithm::automatic)
      throw InputError(field_path(path, g.servers.empty() ? "algorithm" : "servers"),
                       kSplitGroupSettings);
    if (g.sync != SyncMethod::all_reduce &&
        ((g.sync != SyncMethod::sufficient_factor && g.sync != SyncMethod::parameter_server) ||
         replica_count(g) < 2))
      throw InputError(
          field_path(path, "sync"),
          fmt::format("expected all_reduce, or parameter_server or sufficient_factor for a split "
                      "group of several replicas (got {} for {} replica{})",
                      to_string(g.sync), replica_count(g), replica_count(g) == 1 ? "" : "s"));
    return;
  }
  check_shares(g.shares, g.devices.size(), field_path(path, "shares"));
  for (std::size_t j = 0; j < g.devices.size(); ++j)
    if (!(group_share(g, j) * static_cast<double>(p.global_batch) / p.num_microbatches > 0))
      throw InputError(field_path(path, "shares"),
                       "expected shares that give every device samples in every micro-batch");
  if (g.sync == SyncMethod::none)
    throw InputError(field_path(path, "sync"),
                     "expected all_reduce|parameter_server|sufficient_factor for a replicated "
                     "group (its replicas must agree on the weights)");
  if (!g.servers.empty()) {
    const std::string spath = field_path(path, "servers");
    if (g.sync != SyncMethod::parameter_server)
      throw InputError(
          spath, fmt::format("servers apply to sync parameter_server, not {}", to_string(g.sync)));
    check_devices(g.servers, c, spath);
    for (std::size_t i = 0; i < g.servers.size(); ++i) {
      bool member = false;
      for (int d : g.devices) member = member || d == g.servers[i];
      if (!member)
        throw InputError(index_path(spath, i),
                         fmt::format("server {} is not one of the group's devices", g.servers[i]));
    }
  }
}

// Every op in exactly one group; every name or pattern matches some op.
void check_coverage(const Plan& p, const model::Model& m) {
  std::unordered_map<std::string_view, int> by_name;
  for (std::size_t i = 0; i < m.ops.size(); ++i)
    by_name.emplace(m.ops[i].name, static_cast<int>(i));
  std::vector<int> owner(m.ops.size(), -1);
  for (std::size_t g = 0; g < p.op_groups.size(); ++g) {
    const auto& names = p.op_groups[g].ops;
    for (std::size_t k = 0; k < names.size(); ++k) {
      const std::string path = index_path(field_path(group_path(g), "ops"), k);
      auto claim = [&](std::size_t op) {
        const int other = owner[op];
        if (other == static_cast<int>(g)) return;
        if (other >= 0)
          throw InputError(
              path, fmt::format("op \"{}\" is already in {} (expected every op in "
                                "exactly one group)",
                                m.ops[op].name, group_path(static_cast<std::size_t>(other))));
        owner[op] = static_cast<int>(g);
      };
      const std::string& name = names[k];
      if (name.find('*') == std::string::npos) {
        auto it = by_name.find(name);
        if (it == by_name.end())
          throw InputError(path, fmt::format("the model has no op \"{}\"", name));
        claim(static_cast<std::size_t>(it->second));
        continue;
      }
      bool any = false;
      for (std::size_t op = 0; op < m.ops.size(); ++op)
        if (op_pattern_matches(name, m.ops[op].name)) {
          any = true;
          claim(op);
        }
      if (!any)
        throw InputError(path, fmt::format("pattern \"{}\" matches no op of the model", name));
    }
  }
  std::size_t missing = 0;
  std::size_t first = 0;
  for (std::size_t op = m.ops.size(); op-- > 0;)
    if (owner[op] < 0) {
      ++missing;
      first = op;
    }
  if (missing > 0)
    throw InputError(
        "op_groups",
        fmt::format("op \"{}\"{} is in no group (expected every op in exactly one group)",
                    m.ops[first].name,
                    missing > 1 ? fmt::format(" and {} more", missing - 1) : ""));
  if (const auto device = tied_groups_overlap(p, m, owner))
    throw InputError("op_groups", tied_overlap_message(m, owner, *device));
}

}  // namespace

void check_shares(const std::vector<double>& shares, std::size_t devices, const std::string& path) {
  if (shares.empty()) return;
  if (shares.size() != devices)
    throw InputError(path, fmt::format("expected {} shares (one per device) or none, got {}",
                                       devices, shares.size()));
  double sum = 0;
  for (std::size_t i = 0; i < shares.size(); ++i) {
    if (!(shares[i] > 0) || !std::isfinite(shares[i]))
      throw InputError(index_path(path, i), "expected a number > 0");
    sum += shares[i];
  }
  if (std::abs(sum - 1) > kShareTolerance)
    throw InputError(path, fmt::format("expected shares summing to 1, got {}", sum));
}

void check_op_groups(const Plan& p, const model::Model& m, const cluster::Cluster& c) {
  check_settings(p);
  for (std::size_t g = 0; g < p.op_groups.size(); ++g)
    check_group(p, p.op_groups[g], c, group_path(g));
  check_coverage(p, m);
}

}  // namespace hetplan::plan::detail
