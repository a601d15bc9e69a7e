// The emulated links' traffic classes with DLCP's transport: two ranks in their namespaces (as
// threads of this process) sum a gradient whose first half travels in the urgent class and the
// rest in the next; the urgent half is summed well before the rest, and the links' HTB classes
// counted each half's bytes. Needs root; elsewhere skipped with the reason.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <regex>
#include <thread>

#include "../../src/runtime/chunk_transport.h"
#include "hetplan/runtime/emulate.h"

namespace hetplan::runtime::detail {
namespace {

struct MemoryStore {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, std::string> values;
  Rendezvous rendezvous() {
    return {[this](const std::string& k, const std::string& v) {
              std::lock_guard<std::mutex> lock(mu);
              values[k] = v;
              cv.notify_all();
            },
            [this](const std::string& k) {
              std::unique_lock<std::mutex> lock(mu);
              cv.wait(lock, [&] { return values.count(k) > 0; });
              return values[k];
            }};
  }
};

// Bytes the HTB class `id` of `dev` in namespace `ns` sent (tc -s), or -1.
double class_bytes(const std::string& ns, const std::string& dev, const std::string& id) {
  const std::string cmd = "ip netns exec " + ns + " tc -s class show dev " + dev + " 2>/dev/null";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return -1;
  std::string out;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), pipe)) out += buf.data();
  ::pclose(pipe);
  std::smatch m;
  const std::regex re("class htb " + id + " [^\\n]*\\n Sent ([0-9]+) bytes");
  return std::regex_search(out, m, re) ? std::stod(m[1]) : -1;
}

TEST(EmulatedClasses, TheUrgentHalfIsSummedFirstAndEachClassCarriesItsBytes) {
  RankLimits limits;
  limits.bytes_per_s = 50e6 / 8;  // 50 Mbps
  auto e = Emulation::create({limits, limits}, "c" + std::to_string(::getpid()));
  if (!e) GTEST_SKIP() << "this environment refuses emulation: " << e.error().message;
  // 8 MiB of gradient: 8 layers of 1 MiB, a chunk each, 4 MiB in class 0 and 4 in class 1.
  const std::vector<std::int64_t> layers(8, 256 * 1024);
  const auto chunks = order_chunks(layers, 256 * 1024, plan::GradPriority::layer, 0, {});
  MemoryStore store;
  std::array<ChunkSyncStats, 2> stats{};
  std::array<std::string, 2> failed;
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      if (!(*e)->enter_network(r)) {
        failed[r] = "cannot enter the namespace";
        return;
      }
      auto t = ChunkTransport::connect(store.rendezvous(), "c", r, 2, {(*e)->address(r)},
                                       std::chrono::milliseconds(60000));
      if (!t) {
        failed[r] = t.error().message;
        return;
      }
      std::vector<float> g(2 * 1024 * 1024, static_cast<float>(r + 1));
      auto s = (*t)->sum(g.data(), chunks, ChunkSyncOptions{});
      if (!s) {
        failed[r] = s.error().message;
        return;
      }
      stats[r] = *s;
      if (g.front() != 3.0f || g.back() != 3.0f) failed[r] = "wrong sums";
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(failed[r], "") << "rank " << r;
    // Both halves start at once; the links serve the urgent one first. (One queue would finish
    // them together: each at about the whole time.)
    EXPECT_LT(stats[r].class_seconds[0], 0.75 * stats[r].class_seconds[1])
        << "rank " << r << ": class 0 at " << stats[r].class_seconds[0] << " s, class 1 at "
        << stats[r].class_seconds[1] << " s";
    // In a ring of two each rank sends a chunk's half twice (reduce-scatter, all-gather): 4 MiB
    // of each class, marked for it.
    for (const char* id : {"1:10", "1:11"})
      EXPECT_GT(class_bytes((*e)->network_namespace(r), "eth0", id), 4.0e6)
          << "rank " << r << " class " << id;
  }
}

}  // namespace
}  // namespace hetplan::runtime::detail
