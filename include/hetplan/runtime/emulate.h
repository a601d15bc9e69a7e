// An unlike cluster on one machine (hetplan run --emulate): each rank runs in its own network
// namespace, joined to the others by a veth pair to a bridge, with its node's NIC bandwidth
// applied by tc (and its latency where the kernel has netem), shared by traffic classes that
// packets pick with their DSCP (emulated_class_tos: DLCP's gradient chunks), the lower class
// served first, and its node's share of one CPU
// applied by the cgroup cpu controller (v2 cpu.max or v1 cpu.cfs_quota_us). Needs root; what the
// environment refuses is reported, never silently skipped. Everything is torn down on
// destruction. Traffic stays between the namespaces made here.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hetplan/cluster/cluster.h"
#include "hetplan/core/error.h"

namespace hetplan::runtime {

// Traffic classes of the emulated links, the most urgent first, and the IP type-of-service byte
// (DSCP << 2) that puts a packet in each: EF (46), AF21 (18), CS1 (8). Unmarked packets go in
// class 1.
inline constexpr int kEmulatedClasses = 3;
constexpr int emulated_class_tos(int cls) {
  constexpr int kDscp[kEmulatedClasses] = {46, 18, 8};
  return kDscp[cls < 0 ? 0 : cls >= kEmulatedClasses ? kEmulatedClasses - 1 : cls] << 2;
}

struct RankLimits {
  double cpu_share = 1.0;  // of one core
  double bytes_per_s = 0;  // egress and ingress of its link; 0: unlimited
  double latency_s = 0;    // one way, added on egress (needs netem)
  // Cross traffic into the rank's link (other tenants): the fraction of the time a TCP flow from
  // outside the job sends into it as fast as it can (on and off periods, exponential, a mean of
  // kCrossTrafficOnS on). 0: none.
  double background_load = 0;
};

inline constexpr double kCrossTrafficOnS = 0.05;
inline constexpr int kMaxEmulatedPaths = 4;
// The environment variable that tells an emulated rank its paths' interfaces (launch.h sets it
// where the emulation has several): DLCP's transport listens on each.
inline constexpr const char* kPathInterfacesVariable = "HETPLAN_PATH_INTERFACES";

// The limits of the ranks that run on `devices` of cluster `c`: the node's cpu_share, its NICs'
// bandwidth split over its devices, the NIC latency, and the largest background_load of the
// cluster's network links (cluster.h) as cross traffic.
std::vector<RankLimits> rank_limits(const cluster::Cluster& c, const std::vector<int>& devices);

class Emulation {
 public:
  // Sets up one namespace, link and cgroup per rank, and where a rank has background load, a
  // namespace of cross traffic on the bridge with a process that drives it (its flows' on and
  // off periods drawn from `seed`). `tag` keeps concurrent emulations apart (e.g. the process id).
  // With `paths` > 1 (at most kMaxEmulatedPaths), every rank has that many links to the others,
  // each at 1/paths of its bandwidth over a bridge of its own (a leaf-spine's spines: a flow on
  // one path gets at most its share, a transfer spread over all of them the whole).
  static Result<std::unique_ptr<Emulation>> create(const std::vector<RankLimits>& ranks,
                                                   const std::string& tag,
                                                   std::uint64_t seed = 1, int paths = 1);
  ~Emulation();
  Emulation(const Emulation&) = delete;
  Emulation& operator=(const Emulation&) = delete;

  int size() const { return static_cast<int>(addresses_.size()); }
  const std::string& address(int rank) const { return addresses_[rank]; }
  // The interface name of every rank inside its namespace (for GLOO_SOCKET_IFNAME): the first
  // path's.
  static const char* interface() { return "eth0"; }
  int paths() const { return paths_; }
  // Every path's interface, comma-separated ("eth0,eth1"), for kPathInterfacesVariable.
  std::string path_interfaces() const;
  // In a forked child before exec: moves the calling process into rank r's cgroup and network
  // namespace. False (errno set) when either fails.
  bool enter(int rank) const noexcept;
  // Moves the calling thread (only) into rank r's network namespace, not its cgroup: for tests
  // that talk between ranks from one process. False (errno set) when it fails.
  bool enter_network(int rank) const noexcept;
  // The name of rank r's network namespace (`ip netns exec NAME ...`).
  const std::string& network_namespace(int rank) const { return namespaces_[rank]; }
  // What was not applied (e.g. latency without netem); empty when everything was.
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  Emulation() = default;
  std::string tag_;
  int paths_ = 1;
  std::vector<std::string> namespaces_;    // per rank, then the hub last
  std::vector<std::string> addresses_;     // per rank
  std::vector<std::string> cgroup_procs_;  // per rank: the file a pid is written to
  std::vector<std::string> cgroup_dirs_;   // to remove, innermost first
  std::vector<std::string> notes_;
  struct CrossTraffic;  // the thread that drives the cross traffic, if any
  std::unique_ptr<CrossTraffic> cross_traffic_;
};

}  // namespace hetplan::runtime
