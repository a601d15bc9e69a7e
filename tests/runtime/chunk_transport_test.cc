// DLCP's transport: the chunks' order, classes and droppable set (exact on small cases), and
// sums over real TCP connections between ranks run as threads of this process, in both forms,
// with and without drops.
#include "../../src/runtime/chunk_transport.h"

#include <gtest/gtest.h>

#include <cmath>
#include <condition_variable>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace hetplan::runtime::detail {
namespace {

using plan::GradPriority;

TEST(OrderChunks, LayerOrderClassesAndTheLeastImportantDroppable) {
  // 12 elements: layers of 5, 3 and 4, chunks of 2. A bound of 0.25 allows 3 elements: the last
  // chunk (2) fits, the one before it would make 4.
  const auto c = order_chunks({5, 3, 4}, 2, GradPriority::layer, 0.25, {});
  ASSERT_EQ(c.size(), 7u);
  const std::int64_t offsets[] = {0, 2, 4, 5, 7, 8, 10}, sizes[] = {2, 2, 1, 2, 1, 2, 2};
  const int layers[] = {0, 0, 0, 1, 1, 2, 2};
  // Classes: the kept 10 elements' first half (elements before 5) in class 0.
  const int classes[] = {0, 0, 0, 1, 1, 1, 2};
  for (std::size_t i = 0; i < c.size(); ++i) {
    EXPECT_EQ(c[i].offset, offsets[i]) << i;
    EXPECT_EQ(c[i].numel, sizes[i]) << i;
    EXPECT_EQ(c[i].layer, layers[i]) << i;
    EXPECT_EQ(c[i].cls, classes[i]) << i;
    EXPECT_EQ(c[i].droppable, i == 6) << i;
  }
}

TEST(OrderChunks, MagnitudeOrdersWithinALayerAndDropsTheSmallestAnywhere) {
  // Layers of 4 and 4, chunks of 2: mean squares by layout 1, 9, 0.5, 4.
  const auto c = order_chunks({4, 4}, 2, GradPriority::layer_magnitude, 0.25, {1, 9, 0.5, 4});
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[0].offset, 2);  // layer 0's larger first
  EXPECT_EQ(c[1].offset, 0);
  EXPECT_EQ(c[2].offset, 6);
  EXPECT_EQ(c[3].offset, 4);
  // The bound (2 of 8 elements) drops the smallest, layer 1's first chunk, not the last in order.
  for (const auto& x : c) EXPECT_EQ(x.droppable, x.offset == 4) << x.offset;
  EXPECT_EQ(c[3].cls, 2);
  // Without the previous step's magnitudes: layer order.
  const auto plain = order_chunks({4, 4}, 2, GradPriority::layer_magnitude, 0, {});
  for (std::size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(plain[i].offset, 2 * std::int64_t(i));
}

TEST(OrderChunks, MeanSquaresByLayout) {
  const float flat[] = {1, 1, 3, -3, 2};
  const auto c = order_chunks({5}, 2, GradPriority::layer, 0, {});
  const auto ms = chunk_mean_squares(flat, c);
  ASSERT_EQ(ms.size(), 3u);
  EXPECT_DOUBLE_EQ(ms[0], 1);
  EXPECT_DOUBLE_EQ(ms[1], 9);
  EXPECT_DOUBLE_EQ(ms[2], 4);
}

TEST(OrderChunks, AChunkThatMissedAPartIsNotDroppedNextStep) {
  const float flat[] = {1, 1, 0, 0, 2, 2};
  const auto c = order_chunks({6}, 2, GradPriority::layer, 0.34, {});
  ASSERT_TRUE(c[2].droppable);
  // The last chunk's sum missed a part (it was dropped): infinitely important next step.
  const auto ms = chunk_mean_squares(flat, c, {1, 1, 0});
  ASSERT_EQ(ms.size(), 3u);
  EXPECT_DOUBLE_EQ(ms[0], 1);
  EXPECT_DOUBLE_EQ(ms[1], 0);
  EXPECT_TRUE(std::isinf(ms[2]));
  // In layer order the bound (2 of 6 elements) now drops the chunk before it.
  const auto next = order_chunks({6}, 2, GradPriority::layer, 0.34, ms);
  for (const auto& x : next) EXPECT_EQ(x.droppable, x.offset == 2) << x.offset;
  // By magnitude it goes first in its layer.
  EXPECT_EQ(order_chunks({6}, 2, GradPriority::layer_magnitude, 0.34, ms)[0].offset, 4);
}

// A store in memory for ranks that are threads.
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

// Rank r's gradient: small integers, so that every order of summing gives the same floats.
std::vector<float> gradient(int r, std::int64_t numel) {
  std::vector<float> g(static_cast<std::size_t>(numel));
  for (std::int64_t i = 0; i < numel; ++i) g[static_cast<std::size_t>(i)] = float((i * 7 + r * 13) % 11 - 5);
  return g;
}

struct Outcome {
  std::vector<std::vector<float>> sums;
  std::vector<ChunkSyncStats> stats;
};

Outcome sum_over(int n, const std::vector<OrderedChunk>& chunks, std::int64_t numel,
                 const ChunkSyncOptions& opts,
                 const std::vector<std::string>& paths = {"127.0.0.1"}) {
  MemoryStore store;
  Outcome out;
  out.sums.resize(static_cast<std::size_t>(n));
  out.stats.resize(static_cast<std::size_t>(n));
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r)
    ranks.emplace_back([&, r] {
      auto t = ChunkTransport::connect(store.rendezvous(), "g", r, n, paths,
                                       std::chrono::milliseconds(20000));
      ASSERT_TRUE(t) << t.error().message;
      auto g = gradient(r, numel);
      auto s = (*t)->sum(g.data(), chunks, opts);
      ASSERT_TRUE(s) << s.error().message;
      out.sums[static_cast<std::size_t>(r)] = g;
      out.stats[static_cast<std::size_t>(r)] = *s;
    });
  for (auto& t : ranks) t.join();
  return out;
}

class ChunkSum : public ::testing::TestWithParam<SyncForm> {};

TEST_P(ChunkSum, WithoutALossBoundEveryRankHoldsTheExactSum) {
  const std::vector<std::int64_t> layers{1000, 37, 70000, 5};
  const std::int64_t numel = 1000 + 37 + 70000 + 5;
  const auto chunks = order_chunks(layers, 4096, GradPriority::layer, 0, {});
  ChunkSyncOptions opts;
  opts.form = GetParam();
  for (int n : {2, 3}) {
    const Outcome o = sum_over(n, chunks, numel, opts);
    std::vector<float> expect(static_cast<std::size_t>(numel), 0.0f);
    for (int r = 0; r < n; ++r) {
      const auto g = gradient(r, numel);
      for (std::size_t i = 0; i < g.size(); ++i) expect[i] += g[i];
    }
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(o.sums[static_cast<std::size_t>(r)], expect) << "rank " << r << " of " << n;
      EXPECT_EQ(o.stats[static_cast<std::size_t>(r)].dropped_fraction, 0.0);
    }
  }
}

TEST_P(ChunkSum, OverTwoPathsSprayedOrHashedEveryRankHoldsTheExactSum) {
  // Two loopback addresses stand for two paths: a listener and a connection per path each.
  const std::vector<std::int64_t> layers{5000, 3, 40000};
  const std::int64_t numel = 45003;
  const auto chunks = order_chunks(layers, 4096, GradPriority::layer, 0, {});
  std::vector<float> expect(static_cast<std::size_t>(numel), 0.0f);
  const int n = 3;
  for (int r = 0; r < n; ++r) {
    const auto g = gradient(r, numel);
    for (std::size_t i = 0; i < g.size(); ++i) expect[i] += g[i];
  }
  for (bool spray : {false, true}) {
    ChunkSyncOptions opts;
    opts.form = GetParam();
    opts.spray = spray;
    const Outcome o = sum_over(n, chunks, numel, opts, {"127.0.0.1", "127.0.0.2"});
    for (int r = 0; r < n; ++r)
      EXPECT_EQ(o.sums[static_cast<std::size_t>(r)], expect) << "rank " << r << " spray " << spray;
  }
}

TEST(EcmpPath, BothEndsAgreeAndFlowsSpread) {
  int on_second = 0;
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b)
      for (int c = 0; c < 3; ++c) {
        const int p = ecmp_path(a, b, c, 2);
        ASSERT_TRUE(p == 0 || p == 1);
        EXPECT_EQ(p, ecmp_path(a, b, c, 2));  // deterministic
        on_second += p;
      }
  // Neither path takes nearly all of the 192 flows.
  EXPECT_GT(on_second, 192 / 4);
  EXPECT_LT(on_second, 3 * 192 / 4);
  EXPECT_EQ(ecmp_path(3, 5, 1, 1), 0);
}

TEST_P(ChunkSum, AtTheBoundsWorstEveryRankDropsTheSameChunks) {
  const std::vector<std::int64_t> layers{4000, 4000, 2000};
  const std::int64_t numel = 10000;
  const auto chunks = order_chunks(layers, 1000, GradPriority::layer, 0.1, {});
  ChunkSyncOptions opts;
  opts.form = GetParam();
  opts.drop_all = true;
  const int n = 3;
  const Outcome o = sum_over(n, chunks, numel, opts);
  std::vector<std::vector<float>> g;
  for (int q = 0; q < n; ++q) g.push_back(gradient(q, numel));
  // The droppable chunk: the last 1000 elements (10% of 10,000).
  for (int r = 0; r < n; ++r) {
    const auto& s = o.sums[static_cast<std::size_t>(r)];
    EXPECT_EQ(s, o.sums[0]) << "rank " << r << " disagrees with rank 0";
    for (std::int64_t i = 0; i < numel; ++i) {
      float expect = 0;
      if (i < 9000) {
        for (int q = 0; q < n; ++q) expect += g[static_cast<std::size_t>(q)][static_cast<std::size_t>(i)];
      } else if (GetParam() == SyncForm::parameter_server) {
        // Every rank drops its push: the owner (chunk 9 of the order, rank 9 mod 3 = 0) keeps
        // its own part only.
        expect = g[0][static_cast<std::size_t>(i)];
      }
      ASSERT_EQ(s[static_cast<std::size_t>(i)], expect) << "rank " << r << " element " << i;
    }
    const auto& st = o.stats[static_cast<std::size_t>(r)];
    // Every rank knows which sums missed a part: the droppable chunk, last in the order.
    ASSERT_EQ(st.complete.size(), chunks.size());
    for (std::size_t k = 0; k < chunks.size(); ++k)
      EXPECT_EQ(st.complete[k], k + 1 == chunks.size() ? 0 : 1) << "rank " << r << " chunk " << k;
    const bool pushes = GetParam() == SyncForm::ring || r != 0;
    EXPECT_DOUBLE_EQ(st.dropped_fraction, pushes ? 0.1 : 0.0) << r;
    EXPECT_GT(st.dropped_norm_fraction, pushes ? 0.0 : -1.0);
  }
}

INSTANTIATE_TEST_SUITE_P(Forms, ChunkSum,
                         ::testing::Values(SyncForm::ring, SyncForm::parameter_server),
                         [](const auto& p) {
                           return std::string(p.param == SyncForm::ring ? "Ring"
                                                                           : "ParameterServer");
                         });

TEST(ChunkTransportConnect, APeerThatNeverPublishesIsAnErrorNotAThrow) {
  const Rendezvous rv{[](const std::string&, const std::string&) {},
                      [](const std::string& k) -> std::string {
                        throw std::runtime_error("no key " + k + " within the store's timeout");
                      }};
  auto t = ChunkTransport::connect(rv, "g", 0, 2, {"127.0.0.1"}, std::chrono::milliseconds(100));
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().message,
            "gradient transport: rank 0 did not find rank 1: no key g/1 within the store's timeout");
}

TEST(ChunkTransportAddress, LoopbackReachesItself) {
  auto a = local_address_towards("127.0.0.1");
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(*a, "127.0.0.1");
  EXPECT_FALSE(local_address_towards("not-an-address"));
}

}  // namespace
}  // namespace hetplan::runtime::detail
