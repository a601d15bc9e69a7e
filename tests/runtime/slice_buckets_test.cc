// ZeRO-2 and -3's gradient buckets: each backward pass's gradients reduced to their slices' owners
// as they arrive, over three members (Gloo on loopback, a thread each). Every member's slice of
// the sums must be the slice of all its passes' gradients summed in one place, and no member may
// keep a parameter's gradient after its pass.
#include "../../src/runtime/slice_buckets.h"

#include <gtest/gtest.h>

#include <functional>
#include <thread>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "../../src/runtime/grad_buckets.h"

namespace hetplan::runtime::detail {
namespace {

constexpr int kMembers = 3;
const auto kTimeout = std::chrono::milliseconds(20000);

struct Net {
  torch::nn::Linear a{4, 8}, b{8, 8}, c{8, 2};
  // a's weight and bias, then b's, then c's: 32 + 8 + 64 + 8 + 16 + 2 = 130 elements.
  std::vector<torch::Tensor> params() const {
    std::vector<torch::Tensor> out;
    for (const auto& layer : {a->parameters(), b->parameters(), c->parameters()})
      out.insert(out.end(), layer.begin(), layer.end());
    return out;
  }
  torch::Tensor loss(const torch::Tensor& x) { return back(front(x)); }
  // Two model chunks: a, then b and c (or c alone, skipping b).
  torch::Tensor front(const torch::Tensor& x) { return torch::relu(a(x)); }
  torch::Tensor back(const torch::Tensor& h) { return c(torch::relu(b(h))).square().sum(); }
  torch::Tensor skip(const torch::Tensor& h) { return c(h).square().sum(); }
};

// Runs member(k, group) for every member at once, each in its own thread with its own Gloo group.
void run_members(const std::function<void(int, c10::intrusive_ptr<Collectives>)>& member) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::thread> threads;
  for (int k = 0; k < kMembers; ++k)
    threads.emplace_back([&, k] {
      auto options = c10d::ProcessGroupGloo::Options::create();
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
      member(k, c10::make_intrusive<c10d::ProcessGroupGloo>(store, k, kMembers, options));
    });
  for (auto& t : threads) t.join();
}

// Inputs of member k's micro-batch mb.
std::vector<std::vector<torch::Tensor>> inputs(int micro_batches) {
  torch::manual_seed(11);
  std::vector<std::vector<torch::Tensor>> out(kMembers);
  for (auto& member : out)
    for (int mb = 0; mb < micro_batches; ++mb) member.push_back(torch::randn({3, 4}));
  return out;
}

// Identical nets, one per member and one to sum every pass's gradients in.
std::vector<Net> nets() {
  std::vector<Net> out;
  for (int k = 0; k <= kMembers; ++k) {
    torch::manual_seed(5);
    out.emplace_back();
  }
  return out;
}

TEST(SliceBuckets, EachMemberGetsItsSliceOfEveryPasssSums) {
  const auto x = inputs(2);
  std::vector<Net> net = nets();
  // Bytes as the simulator counts the layers (fp32): from the last, c and b reach 100, then a. The
  // first bucket's elements [40, 130) cross all three slices (44 elements each, the last 42).
  const std::vector<double> layer_bytes{160, 288, 72};
  std::vector<torch::Tensor> sums(kMembers);
  std::vector<char> kept(kMembers, 0);  // (not vector<bool>: written by three threads)
  run_members([&](int k, c10::intrusive_ptr<Collectives> group) {
    const auto params = net[static_cast<std::size_t>(k)].params();
    const std::vector<ZeroPart> parts{ZeroPart(params, {0, 1, 2, 3, 4, 5}, kMembers, k)};
    SliceBuckets buckets(params, parts, {{{{0, 1}, {2, 3}, {4, 5}}, layer_bytes}}, 100, group,
                         kMembers, k, kTimeout);
    for (int mb = 0; mb < 2; ++mb) {
      // Member 2 has no samples of the second micro-batch: its part of the sums is zeros.
      if (k != 2 || mb != 1) net[static_cast<std::size_t>(k)].loss(x[k][mb]).backward();
      buckets.end_pass(0);
      for (const auto& p : params) kept[k] = kept[k] || p.grad().defined() ? 1 : 0;
    }
    sums[k] = buckets.finish().at(0);
  });
  EXPECT_FALSE(kept[0] || kept[1] || kept[2]);
  Net& one = net.back();
  for (int k = 0; k < kMembers; ++k)
    for (int mb = 0; mb < 2; ++mb)
      if (k != 2 || mb != 1) one.loss(x[k][mb]).backward();
  const torch::Tensor whole = flatten(grads_of(one.params()));
  ASSERT_EQ(whole.numel(), 130);
  for (int k = 0; k < kMembers; ++k) {
    const ZeroSlice s(130, kMembers, k);
    ASSERT_EQ(sums[k].numel(), s.end - s.begin) << "member " << k;
    EXPECT_TRUE(torch::allclose(sums[k], whole.slice(0, s.begin, s.end), 1e-5, 1e-6))
        << "member " << k;
  }
}

// ZeRO-3's parts, one per model chunk, each chunk's buckets started by its own passes (a pipeline's
// backward pass through the second chunk, then the first); a pass that leaves some of a chunk's
// parameters without gradients gives zeros for them.
TEST(SliceBuckets, ChunksAndTheirPartsSumApart) {
  const auto x = inputs(2);
  std::vector<Net> net = nets();
  // The second micro-batch skips b on member 1.
  auto skips = [](int k, int mb) { return k == 1 && mb == 1; };
  std::vector<std::vector<torch::Tensor>> sums(kMembers);
  run_members([&](int k, c10::intrusive_ptr<Collectives> group) {
    Net& mine = net[static_cast<std::size_t>(k)];
    const auto params = mine.params();
    const std::vector<ZeroPart> parts{ZeroPart(params, {0, 1}, kMembers, k),
                                      ZeroPart(params, {2, 3, 4, 5}, kMembers, k)};
    SliceBuckets buckets(params, parts, {{{{0, 1}}, {160}}, {{{2, 3}, {4, 5}}, {288, 72}}}, 1,
                         group, kMembers, k, kTimeout);
    EXPECT_EQ(buckets.count(), 3);
    for (int mb = 0; mb < 2; ++mb) {
      const torch::Tensor y = mine.front(x[k][mb]);
      const torch::Tensor h = y.detach().requires_grad_(true);
      (skips(k, mb) ? mine.skip(h) : mine.back(h)).backward();
      buckets.end_pass(1);
      y.backward(h.grad());
      buckets.end_pass(0);
    }
    sums[k] = buckets.finish();
  });
  Net& one = net.back();
  for (int k = 0; k < kMembers; ++k)
    for (int mb = 0; mb < 2; ++mb) {
      const torch::Tensor y = one.front(x[k][mb]);
      (skips(k, mb) ? one.skip(y) : one.back(y)).backward();
    }
  const auto all = one.params();
  const std::vector<torch::Tensor> whole{flatten(grads_of({all[0], all[1]})),
                                         flatten(grads_of({all[2], all[3], all[4], all[5]}))};
  for (int k = 0; k < kMembers; ++k) {
    ASSERT_EQ(sums[k].size(), 2u);
    for (std::size_t q = 0; q < 2; ++q) {
      const ZeroSlice s(whole[q].numel(), kMembers, k);
      EXPECT_TRUE(torch::allclose(sums[k][q], whole[q].slice(0, s.begin, s.end), 1e-5, 1e-6))
          << "member " << k << ", part " << q;
    }
  }
}

}  // namespace
}  // namespace hetplan::runtime::detail
