// hetplan run when a rank dies or hangs: the others stop within a bounded time and name it, and
// a periodic checkpoint taken before the failure resumes with the losses of an uninterrupted run.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "../cli/run_command.h"
#include "hetplan/runtime/launch.h"

namespace hetplan::runtime {
namespace {

namespace fs = std::filesystem;
using cli::testing::run_hetplan;
using cli::testing::slurp;
using Clock = std::chrono::steady_clock;

constexpr const char* kMlp = "mlp:layers=2,hidden=64,in=32,out=10";

fs::path temp(const std::string& name) {
  return fs::temp_directory_path() / ("hetplan_failure_" + name + "_" + std::to_string(::getpid()));
}

// Starts hetplan with `args` and the environment variables `env`, its stderr going to `err` (and
// its stdout to `out`, if given).
pid_t spawn(const std::string& args, const std::map<std::string, std::string>& env,
            const fs::path& err, const fs::path& out = "/dev/null") {
  const pid_t pid = ::fork();
  if (pid == 0) {
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    const std::string cmd = "exec " + std::string(HETPLAN_BINARY) + " " + args + " >" +
                            out.string() + " 2>" + err.string();
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

// Kills the processes it holds when it goes out of scope (a failed assertion included).
struct Reaper {
  std::vector<pid_t> pids;
  ~Reaper() {
    for (pid_t p : pids) ::kill(p, SIGKILL);
    for (pid_t p : pids) ::waitpid(p, nullptr, WNOHANG);
  }
};

// Waits for `pid` to end, at most `limit`: its exit status, or -1 when it is still running.
int wait_for(pid_t pid, std::chrono::seconds limit) {
  const auto until = Clock::now() + limit;
  while (Clock::now() < until) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return -1;
}

// Waits until the job's first checkpoint exists: its ranks are then all running steps.
bool wait_for_checkpoint(const fs::path& dir) {
  for (int i = 0; i < 1200; ++i) {
    if (fs::exists(dir / "latest")) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// The processes whose parent is `parent`, by their RANK variable.
std::map<int, pid_t> workers_of(pid_t parent) {
  std::map<int, pid_t> out;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string pid, comm, state;
    pid_t ppid = 0;
    if (!(stat >> pid >> comm >> state >> ppid) || ppid != parent) continue;
    const std::string vars = slurp((entry.path() / "environ").string());
    for (std::size_t p = 0; p < vars.size();) {
      const auto end = vars.find('\0', p);
      const std::string var = vars.substr(p, end == std::string::npos ? end : end - p);
      if (var.rfind("RANK=", 0) == 0) out[std::stoi(var.substr(5))] = std::stoi(pid);
      if (end == std::string::npos) break;
      p = end + 1;
    }
  }
  return out;
}

std::vector<double> losses_of(const std::string& args) {
  auto r = run_hetplan("run --json " + args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (r.exit_code != 0) return {};
  return nlohmann::json::parse(r.out)["losses"].get<std::vector<double>>();
}

TEST(RunFailures, AKilledRankIsNamedAndTheCheckpointResumesTheRun) {
  const fs::path dir = temp("checkpoint"), err = temp("err");
  fs::remove_all(dir);
  const std::string job = std::string("--model ") + kMlp + " --nprocs 3 --strategy dp=3,gbs=12";
  const pid_t launcher = spawn(
      "run --steps 1000000 --checkpoint-every 7 --checkpoint " + dir.string() + " " + job, {}, err);
  Reaper reaper{{launcher}};
  ASSERT_TRUE(wait_for_checkpoint(dir)) << slurp(err.string());
  const auto workers = workers_of(launcher);
  for (const auto& [rank, pid] : workers) reaper.pids.push_back(pid);
  ASSERT_EQ(workers.size(), 3u);
  const auto killed_at = Clock::now();
  ::kill(workers.at(1), SIGKILL);
  const int status = wait_for(launcher, std::chrono::seconds(60));
  const double took = std::chrono::duration<double>(Clock::now() - killed_at).count();
  ASSERT_NE(status, -1) << "the job did not end";
  reaper.pids.clear();  // reaped: the launcher, and its workers with it
  EXPECT_LT(took, 30.0);
  EXPECT_NE(WEXITSTATUS(status), 0);
  EXPECT_NE(slurp(err.string()).find("rank 1 "), std::string::npos) << slurp(err.string());

  // Resumed from the newest whole step (a multiple of 7): five more steps give the losses an
  // uninterrupted run has at those steps.
  auto r = run_hetplan("run --json --steps 5 --checkpoint " + dir.string() + " " + job);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const int first = j["first_step"].get<int>();
  EXPECT_GT(first, 0);
  EXPECT_EQ(first % 7, 0);
  const auto resumed = j["losses"].get<std::vector<double>>();
  const auto whole = losses_of("--steps " + std::to_string(first + 5) + " " + job);
  ASSERT_EQ(whole.size(), static_cast<std::size_t>(first + 5));
  ASSERT_EQ(resumed.size(), 5u);
  for (int i = 0; i < 5; ++i)
    EXPECT_NEAR(resumed[i], whole[first + i], 1e-6 * std::abs(whole[first + i])) << i;
  // Only the newest step is kept.
  int steps_kept = 0;
  for (const auto& entry : fs::directory_iterator(dir)) steps_kept += entry.is_directory();
  EXPECT_EQ(steps_kept, 1);
  fs::remove_all(dir);
  fs::remove(err);
}

TEST(RunFailures, AHungRankIsNamedWithinTheTimeout) {
  // Three ranks started as torchrun would (no launcher to notice): rank 2 stops (SIGSTOP), and
  // ranks 0 and 1 give up after --timeout (5 s) and name it. Every layer of the 9 has a gradient
  // bucket of its own, so collectives are queued behind the one that times out.
  const fs::path dir = temp("progress");
  fs::remove_all(dir);
  const fs::path plan = temp("plan.json");
  std::ofstream(plan) << R"({"version": 1, "global_batch": 12, "grad_bucket_bytes": 1,
    "stages": [{"first_layer": 0, "num_layers": 9, "replicas": [
      {"devices": [0], "batch_share": 0.3333333333333333},
      {"devices": [1], "batch_share": 0.3333333333333333},
      {"devices": [2], "batch_share": 0.3333333333333334}]}]})";
  const auto free = free_port();
  ASSERT_TRUE(free) << free.error().message;
  const std::string port = std::to_string(*free);
  std::vector<pid_t> ranks;
  std::vector<fs::path> errs;
  for (int rank = 0; rank < 3; ++rank) {
    errs.push_back(temp("err" + std::to_string(rank)));
    ranks.push_back(spawn(
        std::string("run --steps 1000000 --timeout 5 --checkpoint-every 7 ") + "--checkpoint " +
            dir.string() + " --model mlp:layers=8,hidden=64,in=32,out=10 --plan " + plan.string(),
        {{"MASTER_ADDR", "127.0.0.1"},
         {"MASTER_PORT", port},
         {"WORLD_SIZE", "3"},
         {"RANK", std::to_string(rank)}},
        errs.back()));
  }
  Reaper reaper{ranks};
  ASSERT_TRUE(wait_for_checkpoint(dir)) << slurp(errs[0].string());
  const auto stopped_at = Clock::now();
  ::kill(ranks[2], SIGSTOP);
  for (int rank = 0; rank < 2; ++rank) {
    const int status = wait_for(ranks[rank], std::chrono::seconds(60));
    EXPECT_NE(status, -1) << "rank " << rank << " did not end";
    if (status != -1) {
      EXPECT_EQ(WEXITSTATUS(status), 2);
    }
    const std::string text = slurp(errs[rank].string());
    EXPECT_NE(text.find("rank 2 stopped answering"), std::string::npos) << text;
  }
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - stopped_at).count(), 30.0);
  for (pid_t p : ranks) ::kill(p, SIGKILL);
  for (pid_t p : ranks) ::waitpid(p, nullptr, 0);
  reaper.pids.clear();
  fs::remove_all(dir);
  fs::remove(plan);
  for (const auto& e : errs) fs::remove(e);
}

// --elastic: a rank killed mid-run (its device lost) makes the job plan for the devices left,
// write that plan beside the checkpoints and resume there from the newest whole step, ending with
// the losses of an uninterrupted run. Plain local workers, then (where this environment allows
// it) workers in an emulated cluster's namespaces.
TEST(RunFailures, ElasticReplansForTheDevicesLeftAndResumes) {
  constexpr const char* kGpt = "gpt:layers=2,hidden=64,heads=4,seq=32,vocab=256";
  const fs::path cluster = temp("cluster.yaml");
  std::ofstream(cluster) << R"(version: 1
nodes:
  - {group: cpu, count: 3, device: cpu, devices_per_node: 1, cpu_share: 0.6,
     intra_node: {bandwidth: 5GB/s}, nic: {bandwidth: 1Gbps, count: 1, latency: 50us}}
network: {kind: switch}
)";
  const std::string job = std::string("--model ") + kGpt + " --cluster " + cluster.string() +
                          " --nprocs 3 --strategy dp=3,gbs=12";
  const auto whole = losses_of("--steps 40 " + job);
  ASSERT_EQ(whole.size(), 40u);
  for (const std::string emulate : {"", " --emulate"}) {
    const fs::path dir = temp("elastic"), err = temp("elastic_err"), out = temp("elastic_out");
    fs::remove_all(dir);
    const pid_t launcher =
        spawn("run --json --steps 40 --checkpoint-every 5 --elastic --checkpoint " + dir.string() +
                  " " + job + emulate,
              {}, err, out);
    Reaper reaper{{launcher}};
    if (!wait_for_checkpoint(dir)) {
      const std::string why = slurp(err.string());
      if (!emulate.empty() && why.find("--emulate:") != std::string::npos)
        GTEST_SKIP() << "this environment refuses emulation: " << why;
      FAIL() << why;
    }
    const auto workers = workers_of(launcher);
    for (const auto& [rank, pid] : workers) reaper.pids.push_back(pid);
    ASSERT_EQ(workers.size(), 3u);
    ::kill(workers.at(1), SIGKILL);
    const int status = wait_for(launcher, std::chrono::seconds(180));
    ASSERT_NE(status, -1) << "the job did not end";
    reaper.pids.clear();
    const std::string log = slurp(err.string());
    ASSERT_EQ(WEXITSTATUS(status), 0) << log;
    EXPECT_NE(log.find("--elastic: rank 1 (device 1, cpu/1/0) is gone"), std::string::npos) << log;
    const auto j = nlohmann::json::parse(slurp(out.string()));
    const int first = j["first_step"].get<int>();
    EXPECT_GE(first, 5);
    EXPECT_EQ(first % 5, 0);
    const auto resumed = j["losses"].get<std::vector<double>>();
    ASSERT_EQ(resumed.size() + first, whole.size()) << log;
    for (std::size_t i = 0; i < resumed.size(); ++i)
      EXPECT_NEAR(resumed[i], whole[first + i], 1e-4 * std::abs(whole[first + i]))
          << "step " << first + i << emulate;
    // The plan it wrote uses the two devices left.
    const auto plan = nlohmann::json::parse(
        slurp((dir / ("plan-from-step-" + std::to_string(first) + ".json")).string()));
    std::set<int> used;
    for (const auto& s : plan["stages"])
      for (const auto& r : s["replicas"])
        for (int d : r["devices"]) used.insert(d);
    EXPECT_EQ(used, (std::set<int>{0, 2})) << plan.dump();
    fs::remove_all(dir);
    fs::remove(err);
    fs::remove(out);
  }
  fs::remove(cluster);
}

}  // namespace
}  // namespace hetplan::runtime
