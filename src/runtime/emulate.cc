#include "hetplan/runtime/emulate.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace hetplan::runtime {
namespace {

namespace fs = std::filesystem;

// Runs a command (argv form, no shell), its output discarded; the exit code, or -1.
int run_quietly(const std::vector<std::string>& argv) {
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0) {
      ::dup2(null, 1);
      ::dup2(null, 2);
    }
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

Result<bool> run_checked(const std::vector<std::string>& argv, const std::string& why) {
  const int code = run_quietly(argv);
  if (code == 0) return true;
  std::string cmd;
  for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
  return Error{fmt::format("--emulate: {}: `{}` failed (exit {}){}", why, cmd, code,
                           ::geteuid() != 0 ? "; emulation needs root" : "")};
}

bool write_file(const std::string& file, const std::string& text) {
  std::ofstream out(file);
  out << text;
  out.flush();
  return static_cast<bool>(out);
}

// The cgroup directory under which a CPU limit can be set, and whether it is cgroup v2.
Result<std::pair<std::string, bool>> cpu_cgroup_root() {
  std::ifstream v2("/sys/fs/cgroup/cgroup.controllers");
  std::string controllers;
  if (v2 && std::getline(v2, controllers) && controllers.find("cpu") != std::string::npos)
    return std::make_pair(std::string("/sys/fs/cgroup"), true);
  if (fs::exists("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"))
    return std::make_pair(std::string("/sys/fs/cgroup/cpu"), false);
  return Error{
      "--emulate: no cgroup cpu controller found (neither cgroup v2 with cpu nor v1 "
      "/sys/fs/cgroup/cpu)"};
}

}  // namespace

std::vector<RankLimits> rank_limits(const cluster::Cluster& c, const std::vector<int>& devices) {
  std::vector<RankLimits> out;
  for (int d : devices) {
    RankLimits l;
    l.cpu_share = c.nodes[c.devices[d].node].cpu_share;
    if (const int gi = c.group_of(d); gi >= 0) {
      const cluster::NodeGroup& g = c.groups[gi];
      l.bytes_per_s =
          g.nic_bandwidth.value * std::max(1, g.nic_count) / std::max(1, g.devices_per_node);
      l.latency_s = g.nic_latency.value;
    }
    out.push_back(l);
  }
  return out;
}

Result<std::unique_ptr<Emulation>> Emulation::create(const std::vector<RankLimits>& ranks,
                                                     const std::string& tag) {
  std::unique_ptr<Emulation> e(new Emulation());
  e->tag_ = tag;
  const std::string hub = "hp" + tag + "hub";
  // Namespaces first, recorded as they are made so that a failure part way still tears down.
  auto add_ns = [&](const std::string& name) -> Result<bool> {
    auto ok = run_checked({"ip", "netns", "add", name}, "cannot create a network namespace");
    if (ok) e->namespaces_.push_back(name);
    return ok;
  };
  auto in_ns = [](const std::string& ns, std::vector<std::string> argv) {
    argv.insert(argv.begin(), {"ip", "netns", "exec", ns});
    return argv;
  };
  for (std::size_t r = 0; r < ranks.size(); ++r)
    if (auto ok = add_ns(fmt::format("hp{}r{}", tag, r)); !ok) return ok.error();
  if (auto ok = add_ns(hub); !ok) return ok.error();
  for (const auto& argv : {in_ns(hub, {"ip", "link", "add", "br0", "type", "bridge"}),
                           in_ns(hub, {"ip", "link", "set", "br0", "up"})})
    if (auto ok = run_checked(argv, "cannot make the bridge"); !ok) return ok.error();
  bool netem = true;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const std::string ns = fmt::format("hp{}r{}", tag, r);
    const std::string inner = fmt::format("hp{}v{}", tag, r),
                      outer = fmt::format("hp{}p{}", tag, r);
    const std::string addr = fmt::format("10.77.{}.{}", r / 250, r % 250 + 1);
    const std::vector<std::vector<std::string>> steps = {
        {"ip", "link", "add", inner, "type", "veth", "peer", "name", outer},
        {"ip", "link", "set", inner, "netns", ns},
        {"ip", "link", "set", outer, "netns", hub},
        in_ns(ns, {"ip", "link", "set", inner, "name", interface()}),
        in_ns(ns, {"ip", "addr", "add", addr + "/16", "dev", interface()}),
        in_ns(ns, {"ip", "link", "set", interface(), "up"}),
        in_ns(ns, {"ip", "link", "set", "lo", "up"}),
        in_ns(hub, {"ip", "link", "set", outer, "master", "br0"}),
        in_ns(hub, {"ip", "link", "set", outer, "up"})};
    for (const auto& argv : steps)
      if (auto ok = run_checked(argv, "cannot link the namespaces"); !ok) return ok.error();
    e->addresses_.push_back(addr);
    if (ranks[r].bytes_per_s > 0) {
      // Bandwidth both ways with a token bucket; latency on egress with netem where it exists.
      const std::string rate = fmt::format("{}bit", std::llround(ranks[r].bytes_per_s * 8));
      for (const auto& [where, dev] : {std::pair{ns, std::string(interface())}, {hub, outer}}) {
        auto argv = in_ns(where, {"tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", rate,
                                  "burst", "256kb", "latency", "100ms"});
        if (auto ok = run_checked(argv, "cannot limit a link's bandwidth"); !ok) return ok.error();
      }
      if (ranks[r].latency_s > 0 && netem) {
        auto argv =
            in_ns(ns, {"tc", "qdisc", "replace", "dev", interface(), "root", "netem", "delay",
                       fmt::format("{}us", std::llround(ranks[r].latency_s * 1e6)), "rate", rate});
        if (run_quietly(argv) != 0) {
          netem = false;
          e->notes_.push_back(
              "link latency is not applied: this kernel has no tc netem (bandwidth is)");
        }
      }
    }
  }
  // CPU shares.
  auto root = cpu_cgroup_root();
  if (!root) return root.error();
  const auto [base, v2] = *root;
  const std::string top = fmt::format("{}/hetplan-{}", base, tag);
  std::error_code ec;
  if (!fs::create_directory(top, ec))
    return Error{fmt::format("--emulate: cannot create the cgroup {}: {}", top,
                             ec ? ec.message() : "it exists")};
  e->cgroup_dirs_.push_back(top);
  if (v2 && !write_file(top + "/cgroup.subtree_control", "+cpu"))
    return Error{fmt::format("--emulate: cannot enable the cpu controller in {}", top)};
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const std::string dir = fmt::format("{}/rank{}", top, r);
    if (!fs::create_directory(dir, ec))
      return Error{fmt::format("--emulate: cannot create the cgroup {}: {}", dir, ec.message())};
    e->cgroup_dirs_.insert(e->cgroup_dirs_.begin(), dir);
    // The kernel's default period, 100 ms. A shorter one shares the core out in finer slices but
    // costs compute: each time the quota runs out the worker's caches go cold, and on the machine
    // this was written on, a worker at 0.2 of a core took 1.23-1.38x (10 ms period) and 1.48-1.69x
    // (5 ms) five times its whole-core step time for an MLP, against 1.09-1.2x at 100 ms.
    const long period = std::lround(cluster::kCpuQuotaPeriod.value * 1e6),
               quota = std::max(1000L, std::lround(ranks[r].cpu_share * period));
    const bool ok = v2 ? write_file(dir + "/cpu.max", fmt::format("{} {}", quota, period))
                       : write_file(dir + "/cpu.cfs_period_us", std::to_string(period)) &&
                             write_file(dir + "/cpu.cfs_quota_us", std::to_string(quota));
    if (!ok) return Error{fmt::format("--emulate: cannot set the CPU limit of {}", dir)};
    e->cgroup_procs_.push_back(dir + "/cgroup.procs");
  }
  return e;
}

Emulation::~Emulation() {
  for (const auto& dir : cgroup_dirs_) ::rmdir(dir.c_str());
  for (const auto& ns : namespaces_) run_quietly({"ip", "netns", "del", ns});
}

bool Emulation::enter(int rank) const noexcept {
  const int procs = ::open(cgroup_procs_[rank].c_str(), O_WRONLY);
  if (procs < 0) return false;
  const std::string pid = std::to_string(::getpid());
  const bool wrote = ::write(procs, pid.data(), pid.size()) == static_cast<ssize_t>(pid.size());
  ::close(procs);
  if (!wrote) return false;
  const std::string path = "/var/run/netns/" + namespaces_[rank];
  const int ns = ::open(path.c_str(), O_RDONLY);
  if (ns < 0) return false;
  const bool ok = ::setns(ns, CLONE_NEWNET) == 0;
  ::close(ns);
  return ok;
}

}  // namespace hetplan::runtime
