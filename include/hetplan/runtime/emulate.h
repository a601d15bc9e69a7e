// An unlike cluster on one machine (hetplan run --emulate): each rank runs in its own network
// namespace, joined to the others by a veth pair to a bridge, with its node's NIC bandwidth
// applied by tc (and its latency where the kernel has netem), and its node's share of one CPU
// applied by the cgroup cpu controller (v2 cpu.max or v1 cpu.cfs_quota_us). Needs root; what the
// environment refuses is reported, never silently skipped. Everything is torn down on
// destruction. Traffic stays between the namespaces made here.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "hetplan/cluster/cluster.h"
#include "hetplan/core/error.h"

namespace hetplan::runtime {

struct RankLimits {
  double cpu_share = 1.0;  // of one core
  double bytes_per_s = 0;  // egress and ingress of its link; 0: unlimited
  double latency_s = 0;    // one way, added on egress (needs netem)
};

// The limits of the ranks that run on `devices` of cluster `c`: the node's cpu_share, its NICs'
// bandwidth split over its devices, and the NIC latency.
std::vector<RankLimits> rank_limits(const cluster::Cluster& c, const std::vector<int>& devices);

class Emulation {
 public:
  // Sets up one namespace, link and cgroup per rank. `tag` keeps concurrent emulations apart
  // (e.g. the process id).
  static Result<std::unique_ptr<Emulation>> create(const std::vector<RankLimits>& ranks,
                                                   const std::string& tag);
  ~Emulation();
  Emulation(const Emulation&) = delete;
  Emulation& operator=(const Emulation&) = delete;

  int size() const { return static_cast<int>(addresses_.size()); }
  const std::string& address(int rank) const { return addresses_[rank]; }
  // The interface name of every rank inside its namespace (for GLOO_SOCKET_IFNAME).
  static const char* interface() { return "eth0"; }
  // In a forked child before exec: moves the calling process into rank r's cgroup and network
  // namespace. False (errno set) when either fails.
  bool enter(int rank) const noexcept;
  // What was not applied (e.g. latency without netem); empty when everything was.
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  Emulation() = default;
  std::string tag_;
  std::vector<std::string> namespaces_;    // per rank, then the hub last
  std::vector<std::string> addresses_;     // per rank
  std::vector<std::string> cgroup_procs_;  // per rank: the file a pid is written to
  std::vector<std::string> cgroup_dirs_;   // to remove, innermost first
  std::vector<std::string> notes_;
};

}  // namespace hetplan::runtime
