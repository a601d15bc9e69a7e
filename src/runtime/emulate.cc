#include "hetplan/runtime/emulate.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <random>
#include <thread>

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

// One TCP flow per loaded rank, from a namespace of its own on the bridge into the rank's
// namespace, on and off by turns (exponential periods; on for `load` of the time), sending as fast
// as TCP lets it while on. A thread of this process: it makes each flow's two ends in their
// namespaces (setns moves only the calling thread), then pumps them until stopped.
struct Emulation::CrossTraffic {
  std::thread pump;
  std::atomic<bool> stop{false};
  int wake[2] = {-1, -1};  // a pipe: written to stop the pump

  struct Flow {
    int tx = -1, rx = -1;
    double load = 0;
    bool on = false;
    std::chrono::steady_clock::time_point until;
  };

  // Sets the flows up from the thread (namespaces by path, addresses by rank); the promise says
  // "" or why it failed.
  void run(std::vector<std::pair<std::string, std::string>> ranks,  // namespace, address
           std::vector<double> loads, std::string source_ns, std::uint64_t seed,
           std::promise<std::string> ready) {
    std::vector<Flow> flows;
    auto enter = [](const std::string& ns) {
      const int fd = ::open(("/var/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
      const bool ok = fd >= 0 && ::setns(fd, CLONE_NEWNET) == 0;
      if (fd >= 0) ::close(fd);
      return ok;
    };
    std::string failed;
    for (std::size_t r = 0; r < ranks.size() && failed.empty(); ++r) {
      if (loads[r] <= 0) continue;
      Flow f;
      f.load = std::min(1.0, loads[r]);
      sockaddr_in at{};
      at.sin_family = AF_INET;
      ::inet_pton(AF_INET, ranks[r].second.c_str(), &at.sin_addr);
      socklen_t len = sizeof at;
      const int listener = enter(ranks[r].first)
                               ? ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)
                               : -1;
      if (listener < 0 || ::bind(listener, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0 ||
          ::listen(listener, 1) != 0 ||
          ::getsockname(listener, reinterpret_cast<sockaddr*>(&at), &len) != 0 ||
          !enter(source_ns) || (f.tx = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
          ::connect(f.tx, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0 ||
          (f.rx = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC)) < 0)
        failed = fmt::format("--emulate: cannot start the cross traffic into rank {}: {}", r,
                             std::strerror(errno));
      if (listener >= 0) ::close(listener);
      flows.push_back(f);
    }
    ready.set_value(failed);
    if (failed.empty()) pump_flows(flows, seed);
    for (const Flow& f : flows) {
      if (f.tx >= 0) ::close(f.tx);
      if (f.rx >= 0) ::close(f.rx);
    }
  }

  void pump_flows(std::vector<Flow>& flows, std::uint64_t seed) {
    using Clock = std::chrono::steady_clock;
    std::mt19937_64 rng(seed);
    auto draw = [&](double mean_s) {
      return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
          std::exponential_distribution<double>(1.0 / mean_s)(rng)));
    };
    const auto start = Clock::now();
    for (Flow& f : flows) {  // each starts at a random point of an off period
      f.on = false;
      f.until = start + draw(kCrossTrafficOnS * (1 - f.load) / f.load + 1e-9);
    }
    std::vector<char> buffer(64 * 1024, 0);
    while (!stop.load()) {
      const auto now = Clock::now();
      auto next = now + std::chrono::seconds(1);
      std::vector<pollfd> polls{{wake[0], POLLIN, 0}};
      for (Flow& f : flows) {
        if (now >= f.until) {
          f.on = !f.on && f.load > 0;
          f.until = now + draw(f.on ? kCrossTrafficOnS
                                    : kCrossTrafficOnS * (1 - f.load) / f.load + 1e-9);
        }
        next = std::min(next, f.until);
        polls.push_back({f.tx, static_cast<short>(f.on ? POLLOUT : 0), 0});
        polls.push_back({f.rx, POLLIN, 0});
      }
      const auto wait =
          std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count() + 1;
      if (::poll(polls.data(), polls.size(), static_cast<int>(wait)) <= 0) continue;
      for (std::size_t i = 1; i < polls.size(); ++i) {
        if (polls[i].revents & POLLOUT)
          (void)::send(polls[i].fd, buffer.data(), buffer.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
        if (polls[i].revents & POLLIN)
          (void)::recv(polls[i].fd, buffer.data(), buffer.size(), MSG_DONTWAIT);
      }
    }
  }
};

std::string Emulation::path_interfaces() const {
  std::string out;
  for (int k = 0; k < paths_; ++k) out += fmt::format("{}eth{}", k ? "," : "", k);
  return out;
}

std::vector<RankLimits> rank_limits(const cluster::Cluster& c, const std::vector<int>& devices) {
  double background = 0;
  for (std::size_t l = 0; l < c.links.size(); ++l)
    if (cluster::is_network_link(c, static_cast<int>(l)))
      background = std::max(background, c.links[l].background_load);
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
    l.background_load = background;
    out.push_back(l);
  }
  return out;
}

Result<std::unique_ptr<Emulation>> Emulation::create(const std::vector<RankLimits>& ranks,
                                                     const std::string& tag, std::uint64_t seed,
                                                     int paths) {
  if (ranks.size() > 62000)
    return Error{fmt::format("--emulate: {} ranks; the emulation addresses at most 62,000",
                             ranks.size())};
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
  e->paths_ = std::clamp(paths, 1, kMaxEmulatedPaths);
  for (int k = 0; k < e->paths_; ++k) {
    const std::string bridge = fmt::format("br{}", k);
    for (const auto& argv : {in_ns(hub, {"ip", "link", "add", bridge, "type", "bridge"}),
                             in_ns(hub, {"ip", "link", "set", bridge, "up"})})
      if (auto ok = run_checked(argv, "cannot make the bridge"); !ok) return ok.error();
  }
  bool netem = true;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const std::string ns = fmt::format("hp{}r{}", tag, r);
    if (auto ok = run_checked(in_ns(ns, {"ip", "link", "set", "lo", "up"}), "cannot link the namespaces"); !ok)
      return ok.error();
    for (int k = 0; k < e->paths_; ++k) {
      // Path k: interface eth<k>, 10.<77+k>.0.0/16, bridge br<k> (names of at most 15 bytes).
      const std::string inner = fmt::format("hp{}{}{}", tag, "vwyz"[k], r),
                        outer = fmt::format("hp{}{}{}", tag, "pqst"[k], r),
                        dev = fmt::format("eth{}", k);
      const std::string addr = fmt::format("10.{}.{}.{}", 77 + k, r / 250, r % 250 + 1);
      const std::vector<std::vector<std::string>> steps = {
          {"ip", "link", "add", inner, "type", "veth", "peer", "name", outer},
          {"ip", "link", "set", inner, "netns", ns},
          {"ip", "link", "set", outer, "netns", hub},
          in_ns(ns, {"ip", "link", "set", inner, "name", dev}),
          in_ns(ns, {"ip", "addr", "add", addr + "/16", "dev", dev}),
          in_ns(ns, {"ip", "link", "set", dev, "up"}),
          in_ns(hub, {"ip", "link", "set", outer, "master", fmt::format("br{}", k)}),
          in_ns(hub, {"ip", "link", "set", outer, "up"})};
      for (const auto& argv : steps)
        if (auto ok = run_checked(argv, "cannot link the namespaces"); !ok) return ok.error();
      if (k == 0) e->addresses_.push_back(addr);
      if (ranks[r].bytes_per_s <= 0) continue;
      // Bandwidth both ways (each path 1/paths of the rank's), shared by the traffic classes in
      // their order (an HTB class per traffic class under the link's rate, each with a floor of
      // 1% and the lower class number served first, picked by the packets' DSCP; unmarked
      // traffic rides class 1); latency on each class's queue with netem where it exists.
      const double bits = ranks[r].bytes_per_s * 8 / e->paths_;
      const std::string rate = fmt::format("{}bit", std::llround(bits)),
                        floor = fmt::format("{}bit", std::max(8000LL, std::llround(bits / 100)));
      for (const auto& [where, link] : {std::pair{ns, dev}, {hub, outer}}) {
        std::vector<std::vector<std::string>> argvs = {
            in_ns(where, {"tc", "qdisc", "add", "dev", link, "root", "handle", "1:", "htb",
                          "default", "11"}),
            in_ns(where, {"tc", "class", "add", "dev", link, "parent", "1:", "classid", "1:1",
                          "htb", "rate", rate, "ceil", rate, "burst", "256kb", "cburst", "256kb"})};
        for (int c = 0; c < kEmulatedClasses; ++c) {
          const std::string id = fmt::format("1:1{}", c);
          argvs.push_back(in_ns(where, {"tc", "class", "add", "dev", link, "parent", "1:1",
                                        "classid", id, "htb", "rate", floor, "ceil", rate, "burst",
                                        "256kb", "cburst", "256kb", "prio", std::to_string(c),
                                        "quantum", "60000"}));
          argvs.push_back(in_ns(where, {"tc", "filter", "add", "dev", link, "parent", "1:",
                                        "protocol", "ip", "prio", "1", "u32", "match", "ip",
                                        "dsfield", fmt::format("{:#x}", emulated_class_tos(c)),
                                        "0xfc", "flowid", id}));
        }
        for (const auto& argv : argvs)
          if (auto ok = run_checked(argv, "cannot limit a link's bandwidth"); !ok)
            return ok.error();
      }
      for (int c = 0; c < kEmulatedClasses && ranks[r].latency_s > 0 && netem; ++c) {
        auto argv = in_ns(ns, {"tc", "qdisc", "add", "dev", dev, "parent",
                               fmt::format("1:1{}", c), "netem", "delay",
                               fmt::format("{}us", std::llround(ranks[r].latency_s * 1e6))});
        if (run_quietly(argv) != 0) {
          netem = false;
          e->notes_.push_back(
              "link latency is not applied: this kernel has no tc netem (bandwidth is)");
        }
      }
    }
  }
  // Cross traffic: a namespace of its own on the bridge, its link not limited.
  if (std::any_of(ranks.begin(), ranks.end(), [](const RankLimits& l) { return l.background_load > 0; })) {
    const std::string xns = fmt::format("hp{}x", tag);
    if (auto ok = add_ns(xns); !ok) return ok.error();
    const std::string inner = fmt::format("hp{}xv", tag), outer = fmt::format("hp{}xp", tag);
    const std::vector<std::vector<std::string>> steps = {
        {"ip", "link", "add", inner, "type", "veth", "peer", "name", outer},
        {"ip", "link", "set", inner, "netns", xns},
        {"ip", "link", "set", outer, "netns", hub},
        in_ns(xns, {"ip", "addr", "add", "10.77.250.1/16", "dev", inner}),
        in_ns(xns, {"ip", "link", "set", inner, "up"}),
        in_ns(hub, {"ip", "link", "set", outer, "master", "br0"}),
        in_ns(hub, {"ip", "link", "set", outer, "up"})};
    for (const auto& argv : steps)
      if (auto ok = run_checked(argv, "cannot link the cross traffic's namespace"); !ok)
        return ok.error();
    std::vector<std::pair<std::string, std::string>> where;
    std::vector<double> loads;
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      where.emplace_back(e->namespaces_[r], e->addresses_[r]);
      loads.push_back(ranks[r].background_load);
    }
    e->cross_traffic_ = std::make_unique<CrossTraffic>();
    CrossTraffic& x = *e->cross_traffic_;
    if (::pipe2(x.wake, O_CLOEXEC) != 0)
      return Error{fmt::format("--emulate: cannot start the cross traffic: {}", std::strerror(errno))};
    std::promise<std::string> ready;
    auto started = ready.get_future();
    x.pump = std::thread(&CrossTraffic::run, &x, std::move(where), std::move(loads), xns, seed,
                         std::move(ready));
    if (const std::string why = started.get(); !why.empty()) return Error{why};
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
  if (cross_traffic_) {
    cross_traffic_->stop = true;
    if (cross_traffic_->wake[1] >= 0) (void)!::write(cross_traffic_->wake[1], "x", 1);
    if (cross_traffic_->pump.joinable()) cross_traffic_->pump.join();
    for (int fd : cross_traffic_->wake)
      if (fd >= 0) ::close(fd);
  }
  for (const auto& dir : cgroup_dirs_) ::rmdir(dir.c_str());
  for (const auto& ns : namespaces_) run_quietly({"ip", "netns", "del", ns});
}

bool Emulation::enter_network(int rank) const noexcept {
  const std::string path = "/var/run/netns/" + namespaces_[rank];
  const int ns = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (ns < 0) return false;
  const bool ok = ::setns(ns, CLONE_NEWNET) == 0;
  ::close(ns);
  return ok;
}

bool Emulation::enter(int rank) const noexcept {
  const int procs = ::open(cgroup_procs_[rank].c_str(), O_WRONLY);
  if (procs < 0) return false;
  const std::string pid = std::to_string(::getpid());
  const bool wrote = ::write(procs, pid.data(), pid.size()) == static_cast<ssize_t>(pid.size());
  ::close(procs);
  return wrote && enter_network(rank);
}

}  // namespace hetplan::runtime
