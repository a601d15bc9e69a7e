// The runtime's modules: built from the description, split by layer, recomputing what the plan
// says.
#include "../../src/runtime/torch_modules.h"

#include <gtest/gtest.h>
#include <torch/version.h>

#include <functional>
#include <set>

#include "hetplan/model/zoo.h"

namespace hetplan::runtime::detail {
namespace {

model::Model load(const std::string& spec) {
  auto m = model::load_model(spec);
  EXPECT_TRUE(m) << m.error().message;
  return *m;
}

// Autograd nodes of the graph that produced t whose name mentions `what`.
int count_nodes(const torch::Tensor& t, const std::string& what) {
  int n = 0;
  std::set<torch::autograd::Node*> seen;
  std::function<void(torch::autograd::Node*)> walk = [&](torch::autograd::Node* node) {
    if (!node || !seen.insert(node).second) return;
    if (node->name().find(what) != std::string::npos) ++n;
    for (const auto& e : node->next_edges()) walk(e.function.get());
  };
  walk(t.grad_fn().get());
  return n;
}

TEST(TorchModules, MatchTheDescription) {
  torch::manual_seed(1);
  for (const char* spec :
       {"mlp:layers=3,hidden=32,in=16,out=4", "gpt:layers=3,hidden=64,heads=4,seq=16,vocab=128",
        "gpt:layers=1,hidden=64,heads=4,seq=16,vocab=128,tied=false",
        "resnet:depth=18,width=8,image=32,classes=10",
        "resnet:depth=50,width=4,image=32,classes=10",
        "moe:layers=2,hidden=64,heads=4,kv_heads=2,seq=16,vocab=128,experts=3,top_k=2",
        "vit:layers=2,hidden=32,heads=4,image=32,patch=8,classes=10", "vit-b16",
        "bert:layers=1,hidden=32,heads=4,seq=16,vocab=64", "bert-base"}) {
    const auto m = load(spec);
    auto mod = build_module(m);
    ASSERT_TRUE(mod) << mod.error().message;
    EXPECT_EQ((*mod)->num_layers(), static_cast<int>(m.layers.size())) << spec;
    std::int64_t by_layer = 0;
    for (const auto& t : (*mod)->layer_parameters(0, (*mod)->num_layers())) by_layer += t.numel();
    EXPECT_EQ(by_layer, m.parameters()) << spec;
  }
}

// VGG's and Inception's stage module (their op graphs layer by layer): layers compose to the
// whole loss, each layer's input has the shape activation_shape says, and dropout draws per sample
// the masks the op-by-op runtime draws: two halves of a batch sum to the whole batch's loss.
TEST(TorchModules, OpGraphLayersComposeAndDropOutPerSample) {
  for (const char* spec : {"vgg:depth=11,image=32,classes=10", "inception:image=75,classes=10"}) {
    SCOPED_TRACE(spec);
    torch::manual_seed(1);
    const auto m = load(spec);
    auto built = build_module(m);
    ASSERT_TRUE(built) << built.error().message;
    auto mod = *built;
    ASSERT_EQ(mod->num_layers(), static_cast<int>(m.layers.size()));
    std::int64_t params = 0;
    for (const auto& t : mod->layer_parameters(0, mod->num_layers())) params += t.numel();
    EXPECT_EQ(params, m.parameters());
    torch::NoGradGuard no_grad;
    const Batch b{torch::randn({4, 3, m.image_size, m.image_size}),
                  torch::randint(0, 10, {4}, torch::kLong)};
    const double plain = mod->loss_sum(b).item<double>();
    mod->set_rows(7, 2, 4, 0);
    const double whole = mod->loss_sum(b).item<double>();
    EXPECT_NE(whole, plain);  // dropped out
    torch::Tensor x = b.inputs;
    for (int l = 0; l + 1 < mod->num_layers(); ++l) {
      EXPECT_EQ(x.sizes(), torch::IntArrayRef(mod->activation_shape(l, 4))) << l;
      x = mod->forward_layers(l, 1, x, b.targets);
    }
    const double layered =
        mod->forward_layers(mod->num_layers() - 1, 1, x, b.targets).item<double>();
    EXPECT_NEAR(layered, whole, 1e-5 * std::abs(whole));
    if (m.ops.front().compute.fn == model::OpFn::conv2d &&
        std::none_of(m.ops.begin(), m.ops.end(),
                     [](const model::Op& op) { return op.compute.fn == model::OpFn::batchnorm; })) {
      // Without batch statistics a sample's loss is its own: rows 1-3 from the second sample on.
      mod->set_rows(7, 2, 4, 1);
      const double rest = mod->loss_sum(b.slice(1, 4)).item<double>();
      mod->set_rows(7, 2, 4, 0);
      const double first = mod->loss_sum(b.slice(0, 1)).item<double>();
      EXPECT_NEAR(first + rest, whole, 1e-5 * std::abs(whole));
    }
  }
}

TEST(TorchModules, LayersComposeToTheWholeModel) {
  torch::manual_seed(1);
  const auto m = load("gpt:layers=2,hidden=32,heads=2,seq=8,vocab=64");
  auto mod = *build_module(m);
  const auto ids = torch::randint(0, 64, {3, 8}, torch::kLong);
  const auto targets = torch::randint(0, 64, {3, 8}, torch::kLong);
  const auto whole = mod->loss_sum(Batch{ids, targets});
  const auto a = mod->forward_layers(0, 2, ids, targets);
  EXPECT_EQ(a.sizes(), torch::IntArrayRef(mod->activation_shape(2, 3)));
  const auto split = mod->forward_layers(2, 2, a, targets);
  EXPECT_NEAR(split.item<double>(), whole.item<double>(), 1e-6 * whole.item<double>());
}

// A ViT's layers: images in, the class token's loss out; split after the embedding, the same.
TEST(TorchModules, VitLayersComposeToTheWholeModel) {
  torch::manual_seed(1);
  const auto m = load("vit:layers=2,hidden=32,heads=4,image=32,patch=8,classes=10");
  auto mod = *build_module(m);
  ASSERT_EQ(mod->num_layers(), 4);  // embedding, 2 blocks, head
  const Batch b{torch::randn({3, 3, 32, 32}), torch::randint(0, 10, {3}, torch::kLong)};
  const auto whole = mod->loss_sum(b);
  const auto a = mod->forward_layers(0, 1, b.inputs, b.targets);
  EXPECT_EQ(a.sizes(), torch::IntArrayRef(mod->activation_shape(1, 3)));  // 16 patches + class
  EXPECT_EQ(a.size(1), 17);
  const auto split = mod->forward_layers(1, 3, a, b.targets);
  EXPECT_NEAR(split.item<double>(), whole.item<double>(), 1e-6 * whole.item<double>());
}

// BERT's layers: token ids in, the MLM and next-sentence losses out; split after the first block,
// the same.
TEST(TorchModules, BertLayersComposeToTheWholeModel) {
  torch::manual_seed(1);
  const auto m = load("bert:layers=2,hidden=32,heads=4,seq=16,vocab=64");
  auto mod = *build_module(m);
  ASSERT_EQ(mod->num_layers(), 4);  // embedding, 2 blocks, head
  const auto ids = torch::randint(0, 64, {3, 16}, torch::kLong);
  auto targets = torch::cat(
      {torch::randint(0, 64, {3, 16}, torch::kLong), torch::tensor({{0}, {1}, {1}}, torch::kLong)},
      1);
  targets.slice(1, 0, 8).fill_(-100);  // tokens without a label
  const auto whole = mod->loss_sum(Batch{ids, targets});
  const auto a = mod->forward_layers(0, 2, ids, targets);
  EXPECT_EQ(a.sizes(), torch::IntArrayRef(mod->activation_shape(2, 3)));
  const auto split = mod->forward_layers(2, 2, a, targets);
  EXPECT_NEAR(split.item<double>(), whole.item<double>(), 1e-6 * whole.item<double>());
}

// A pipeline rank keeps its own layers' weights only: a tied LM head split from its embedding
// keeps its copy of the table, and its layers compute what they did with the whole module.
TEST(TorchModules, ARankReleasesTheLayersItDoesNotRun) {
  torch::manual_seed(1);
  const auto m = load("gpt:layers=2,hidden=32,heads=4,seq=16,vocab=64");
  auto mod = *build_module(m);
  ASSERT_EQ(mod->num_layers(), 4);  // embedding, 2 blocks, head (tied to the embedding)
  ASSERT_TRUE(mod->tied_head());
  const auto ids = torch::randint(0, 64, {3, 16}, torch::kLong);
  const auto targets = torch::randint(0, 64, {3, 16}, torch::kLong);
  const auto a = mod->forward_layers(0, 3, ids, targets).detach();
  const auto whole = mod->forward_layers(3, 1, a, targets).item<double>();
  const auto [table, copy] = mod->untie_head();
  const auto first_block = mod->layer_parameters(1, 1);
  mod->release_layers_except({false, false, true, true});  // the second block and the head
  EXPECT_EQ(table.numel(), 0);  // the embedding's table, released: its copy stays with the head
  EXPECT_EQ(copy.numel(), 64 * 32);
  for (const auto& t : first_block) EXPECT_EQ(t.numel(), 0);
  std::int64_t kept = 0;
  for (const auto& t : mod->layer_parameters(2, 2)) kept += t.numel();
  EXPECT_GT(kept, 64 * 32);
  EXPECT_EQ(mod->forward_layers(3, 1, a, targets).item<double>(), whole);
}

TEST(TorchModules, ResNetLayersComposeToTheWholeModel) {
  torch::manual_seed(1);
  const auto m = load("resnet:depth=18,width=8,image=32,classes=10");
  auto mod = *build_module(m);
  ASSERT_EQ(mod->num_layers(), 10);  // stem, 8 basic blocks, head
  const Batch b{torch::randn({4, 3, 32, 32}), torch::randint(0, 10, {4}, torch::kLong)};
  const auto whole = mod->loss_sum(b);
  torch::Tensor x = b.inputs;
  for (int l = 0; l + 1 < mod->num_layers(); ++l) {
    EXPECT_EQ(x.sizes(), torch::IntArrayRef(mod->activation_shape(l, 4))) << l;
    x = mod->forward_layers(l, 1, x, b.targets);
  }
  // 32 px: stem to 8x8 (stride-2 conv, stride-2 pool), then stages at 8, 4, 2, 1 px.
  EXPECT_EQ(x.sizes(), torch::IntArrayRef({4, 64, 1, 1}));
  const auto split = mod->forward_layers(9, 1, x, b.targets);
  EXPECT_NEAR(split.item<double>(), whole.item<double>(), 1e-6 * whole.item<double>());
}

TEST(TorchModules, BatchNormWithoutAGroupIsTorchsBatchNorm) {
  torch::manual_seed(3);
  const auto x = (torch::randn({5, 3, 4, 4}) * 2 + 1).requires_grad_(true);
  const auto w = torch::rand({3}).requires_grad_(true), b = torch::randn({3}).requires_grad_(true);
  const auto gy = torch::randn({5, 3, 4, 4});
  const auto ours = batch_norm_over_group(x, w, b, nullptr);
  const auto theirs = torch::batch_norm(x, w, b, {}, {}, /*training=*/true, 0.1, 1e-5, false);
  EXPECT_TRUE(torch::allclose(ours, theirs, 1e-5, 1e-5));
  const auto g1 = torch::autograd::grad({ours}, {x, w, b}, {gy});
  const auto g2 = torch::autograd::grad({theirs}, {x, w, b}, {gy});
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(torch::allclose(g1[i], g2[i], 1e-4, 1e-5)) << i;
}

TEST(TorchModules, RecomputationIsInTheBackwardGraph) {
  torch::manual_seed(1);
  const auto gpt = load("gpt:layers=3,hidden=32,heads=2,seq=8,vocab=64");
  auto mod = *build_module(gpt);
  const Batch b{torch::randint(0, 64, {2, 8}, torch::kLong),
                torch::randint(0, 64, {2, 8}, torch::kLong)};
  EXPECT_EQ(count_nodes(mod->loss_sum(b), "Recomputed"), 0);
  mod->set_recompute(cost::Recompute::full);
  EXPECT_EQ(count_nodes(mod->loss_sum(b), "Recomputed"), 3);  // one per block
  mod->set_recompute(cost::Recompute::selective);
  EXPECT_EQ(count_nodes(mod->loss_sum(b), "Recomputed"), 3);  // one attention core per block
  // A fused attention core: libtorch's kernel where it has one, else the core recomputed (which
  // keeps as little of it).
  mod->set_recompute(cost::Recompute::none);
  mod->set_attention(cost::Attention::flash);
  EXPECT_EQ(count_nodes(mod->loss_sum(b), "Recomputed"), TORCH_VERSION_MAJOR >= 2 ? 0 : 3);

  auto mlp = *build_module(load("mlp:layers=2,hidden=16,in=8,out=3"));
  const Batch x{torch::randn({4, 8}), torch::randint(0, 3, {4}, torch::kLong)};
  mlp->set_recompute(cost::Recompute::full);
  auto loss = mlp->loss_sum(x);
  EXPECT_EQ(count_nodes(loss, "Recomputed"), 2);
  loss.backward();  // the recomputation reaches the first layer's weights
  for (const auto& t : mlp->parameters()) EXPECT_TRUE(t.grad().defined());
}

}  // namespace
}  // namespace hetplan::runtime::detail

namespace hetplan::runtime::detail {
namespace {

TEST(TensorParallelUnits, UnevenSharesRoundByLargestRemainder) {
  auto range = [](std::int64_t n, int rank, std::vector<double> shares, int size = 3) {
    TensorParallel tp;
    tp.rank = rank;
    tp.size = size;
    tp.shares = shares;
    auto r = unit_range(n, tp, "heads");
    EXPECT_TRUE(r) << r.error().message;
    return *r;
  };
  // 10 heads at 0.45/0.35/0.2: 4.5, 3.5, 2 -> 5, 3, 2 (ties go to the lower rank).
  EXPECT_EQ(range(10, 0, {0.45, 0.35, 0.2}), (std::pair<std::int64_t, std::int64_t>{0, 5}));
  EXPECT_EQ(range(10, 1, {0.45, 0.35, 0.2}), (std::pair<std::int64_t, std::int64_t>{5, 8}));
  EXPECT_EQ(range(10, 2, {0.45, 0.35, 0.2}), (std::pair<std::int64_t, std::int64_t>{8, 10}));
  EXPECT_EQ(range(7, 1, {}), (std::pair<std::int64_t, std::int64_t>{3, 5}));  // even: 3, 2, 2
  TensorParallel tp;
  tp.size = 2;
  tp.shares = {0.99, 0.01};
  auto r = unit_range(4, tp, "heads");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message,
            "plan: tp_shares: tensor-parallel rank 1 would hold none of the 4 heads (share 0.01)");
}

}  // namespace
}  // namespace hetplan::runtime::detail
