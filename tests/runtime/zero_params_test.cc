// ZeRO's parts and ZeRO-3's released and gathered weights (one rank here: its slice is the whole
// part, so a gather restores exactly the values kept).
#include "../../src/runtime/zero_params.h"

#include <gtest/gtest.h>

#include <thread>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

namespace hetplan::runtime::detail {
namespace {

c10::intrusive_ptr<Collectives> group_of(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                         int size) {
  auto options = c10d::ProcessGroupGloo::Options::create();
  options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
}

c10::intrusive_ptr<Collectives> one_rank_group() {
  return group_of(c10::make_intrusive<c10d::HashStore>(), 0, 1);
}

constexpr auto kTimeout = std::chrono::milliseconds(10000);

TEST(ZeroPart, CutsMemberKsSliceOfItsWeightsFlattened) {
  const std::vector<torch::Tensor> t{torch::arange(6.0).reshape({2, 3}),
                                     torch::arange(100.0, 102.0), torch::arange(200.0, 204.0)};
  // Tensors 0 and 2: 10 elements over 3 members in slices of 4, member 1's are [4, 8).
  const ZeroPart part(t, {0, 2}, 3, 1);
  EXPECT_EQ(part.numel, 10);
  EXPECT_EQ(part.slice.size, 4);
  EXPECT_EQ(part.slice.begin, 4);
  EXPECT_EQ(part.slice.end, 8);
  EXPECT_TRUE(torch::equal(part.owned, torch::tensor({4.0, 5.0, 200.0, 201.0})));
  const auto of = part.of(t);
  ASSERT_EQ(of.size(), 2u);
  EXPECT_TRUE(of[1].is_same(t[2]));
  // The last member's slice is short: [8, 10).
  EXPECT_EQ(ZeroPart(t, {0, 2}, 3, 2).owned.numel(), 2);
}

struct TwoLayers {
  torch::nn::Linear a{4, 8}, b{8, 3};
  std::vector<torch::Tensor> params() {
    auto out = a->parameters();
    for (const auto& p : b->parameters()) out.push_back(p);
    return out;
  }
  torch::Tensor loss(const torch::Tensor& x) { return b(torch::relu(a(x))).square().sum(); }
};

TEST(ZeroParams, ReleasedWeightsKeepTheirShapesAndFreeTheirBytes) {
  torch::manual_seed(3);
  TwoLayers m;
  const auto params = m.params();
  std::vector<torch::Tensor> before;
  for (const auto& p : params) before.push_back(p.detach().clone());
  std::vector<std::size_t> every{0, 1, 2, 3};
  const ZeroPart part(params, every, 1, 0);
  share_storage(part, params, 1);
  // One storage for the part, its weights views of it.
  for (const auto& p : params)
    EXPECT_EQ(p.storage().unsafeGetStorageImpl(), params[0].storage().unsafeGetStorageImpl());
  release_part(part, params);
  EXPECT_EQ(params[0].storage().nbytes(), 0u);
  for (std::size_t i = 0; i < params.size(); ++i) EXPECT_EQ(params[i].sizes(), before[i].sizes());
  const auto group = one_rank_group();
  {
    const WholeWeights whole(*group, 1, part, params, kTimeout);
    EXPECT_EQ(params[0].storage().nbytes(), static_cast<std::size_t>(part.numel) * 4);
    for (std::size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(torch::equal(params[i], before[i]));
  }
  EXPECT_EQ(params[0].storage().nbytes(), 0u);  // released at the scope's end
}

// A forward pass, its weights released (what autograd saved of them freed with them) and gathered
// again, then its backward pass: the gradients of the same pass with the weights kept whole, and
// no in-place change seen by autograd.
TEST(ZeroParams, ABackwardPassReadsTheWeightsGatheredForIt) {
  torch::manual_seed(5);
  TwoLayers kept;
  torch::manual_seed(5);
  TwoLayers sharded;
  const auto x = torch::randn({6, 4});
  kept.loss(x).backward();
  const auto params = sharded.params();
  const ZeroPart part(params, {0, 1, 2, 3}, 1, 0);
  share_storage(part, params, 1);
  release_part(part, params);
  const auto group = one_rank_group();
  torch::Tensor loss;
  {
    const WholeWeights whole(*group, 1, part, params, kTimeout);
    loss = sharded.loss(x);
  }
  EXPECT_EQ(params[0].storage().nbytes(), 0u);  // the saved graph holds no copy
  {
    const WholeWeights whole(*group, 1, part, params, kTimeout);
    loss.backward();
  }
  const auto reference = kept.params();
  for (std::size_t i = 0; i < params.size(); ++i) {
    ASSERT_TRUE(params[i].grad().defined()) << i;
    EXPECT_TRUE(torch::allclose(params[i].grad(), reference[i].grad())) << i;
  }
}

// Two members, 7 elements in slices of 4 (member 1's short, the gather padded): each member keeps
// its slice, changes it (as its optimizer step would), and the gather gives both members the
// weights made of both changed slices.
TEST(ZeroParams, AGatherJoinsEveryMembersSlice) {
  const auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::vector<torch::Tensor>> got(2);
  auto member = [&](int k) {
    const std::vector<torch::Tensor> params{torch::arange(4.0).reshape({2, 2}),
                                            torch::arange(10.0, 13.0)};
    const ZeroPart part(params, {0, 1}, 2, k);
    share_storage(part, params, 2);
    release_part(part, params);
    torch::NoGradGuard no_grad;
    part.owned.add_(100.0 * (k + 1));
    const auto group = group_of(store, k, 2);
    const WholeWeights whole(*group, 2, part, params, kTimeout);
    for (const auto& p : params) got[static_cast<std::size_t>(k)].push_back(p.clone());
  };
  std::thread other(member, 1);
  member(0);
  other.join();
  for (const auto& mine : got) {
    ASSERT_EQ(mine.size(), 2u);
    EXPECT_TRUE(torch::equal(mine[0], torch::tensor({{100.0, 101.0}, {102.0, 103.0}})));
    EXPECT_TRUE(torch::equal(mine[1], torch::tensor({210.0, 211.0, 212.0})));
  }
}

}  // namespace
}  // namespace hetplan::runtime::detail
