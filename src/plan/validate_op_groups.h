// Internal to the plan layer: the checks of an op-level plan (validate.cc calls them).
#pragma once

#include <string>
#include <vector>

#include "hetplan/cluster/cluster.h"
#include "hetplan/model/model.h"
#include "hetplan/plan/plan.h"

namespace hetplan::plan::detail {

// Why a split group takes no servers or algorithm (plan files and validation say it alike).
inline constexpr const char* kSplitGroupSettings =
    "a split group holds a share of each weight and takes no servers or algorithm (its replicas, "
    "if several, all-reduce their gradients, sum them on parameter servers, the first replica's "
    "devices, or gather their sufficient factors)";

// Per-device shares at `path`: none, or one per device, each > 0, summing to 1 (within 1e-6).
void check_shares(const std::vector<double>& shares, std::size_t devices, const std::string& path);

// Throws InputError naming the field for the first problem: settings op-level plans do not take,
// a group's devices, mode, shares, synchronisation and servers, every op in exactly one group, a
// tied head in the group of the table it reads.
void check_op_groups(const Plan& p, const model::Model& m, const cluster::Cluster& c);

}  // namespace hetplan::plan::detail
