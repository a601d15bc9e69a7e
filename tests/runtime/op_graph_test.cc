// The op-by-op executor's graph: the zoo's CNNs, MLPs and BERTs say what each op computes, and
// libtorch's ops give exactly the shapes the descriptions claim.
#include "../../src/runtime/op_graph.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "../../src/runtime/torch_modules.h"
#include "hetplan/model/zoo.h"

namespace hetplan::runtime::detail {
namespace {

model::Model load(const std::string& spec) {
  auto m = model::load_model(spec);
  EXPECT_TRUE(m) << (m ? "" : m.error().message);
  return *m;
}

TEST(OpGraph, TheZoosCnnsMlpsAndBertsSayWhatEveryOpComputes) {
  for (const char* spec :
       {"mlp:layers=2,hidden=8,in=4,out=3", "resnet50", "resnet:depth=18,width=8,image=32", "vgg16",
        "vgg:depth=11,image=32", "inception-v3", "inception:image=75", "bert-large", "gpt3-125m",
        "opt-350m", "gpt:layers=2,hidden=64,heads=4,seq=32,vocab=256",
        "bert:layers=2,hidden=32,heads=4,seq=16,vocab=64", "vit-b16", "vit-h14",
        "vit:layers=2,hidden=32,heads=4,image=32,patch=8,classes=10"}) {
    const auto m = load(spec);
    auto ok = check_op_graph(m);
    EXPECT_TRUE(ok) << spec << ": " << (ok ? "" : ok.error().message);
  }
}

TEST(OpGraph, ModelsWithoutComputeAreRefusedByName) {
  auto ok = check_op_graph(load("llama:layers=2,hidden=64,heads=4,kv_heads=2,seq=32,vocab=256"));
  ASSERT_FALSE(ok);
  EXPECT_NE(ok.error().message.find("op \"layers.0."), std::string::npos) << ok.error().message;
  EXPECT_NE(ok.error().message.find("the zoo's mlp, resnet, vgg, inception, bert, gpt and vit"),
            std::string::npos);
  // A description whose shapes do not fit: a convolution claiming one channel too many.
  auto m = load("resnet:depth=18,width=8,image=32");
  m.ops[0].compute.shape[0] += 1;
  ok = check_op_graph(m);
  ASSERT_FALSE(ok);
  EXPECT_NE(ok.error().message.find("op \"stem.conv\" cannot be executed op by op"),
            std::string::npos)
      << ok.error().message;
}

// A rank of an op-level plan keeps the weights of its ops only.
TEST(OpGraph, ARankReleasesTheWeightsOfOpsItDoesNotRun) {
  const auto m = load("mlp:layers=2,hidden=8,in=4,out=3");
  OpGraph g(m);
  std::vector<bool> held(m.ops.size(), false);
  int first = -1, others = 0;  // the first op with weights, held; the other ops with weights
  for (int o = 0; o < static_cast<int>(m.ops.size()); ++o) {
    if (g.op_parameters(o).empty()) continue;
    if (first < 0)
      first = o;
    else
      ++others;
  }
  ASSERT_GE(first, 0);
  ASSERT_GT(others, 0);
  held[static_cast<std::size_t>(first)] = true;
  const auto kept = g.op_parameters(first)[0].clone();
  g.release_ops_except(held);
  EXPECT_TRUE(torch::equal(g.op_parameters(first)[0], kept));
  for (std::size_t o = 0; o < m.ops.size(); ++o) {
    if (held[o]) continue;
    for (const auto& t : g.op_parameters(static_cast<int>(o))) EXPECT_EQ(t.numel(), 0) << o;
  }
}

// The zoo's CNNs run layer by layer as stage modules; a layer reading an op of the layer before
// other than its last (what a pipeline stage sends) is refused by name.
TEST(OpGraph, LayerChainsOfTheZoosCnns) {
  for (const char* spec : {"vgg16", "vgg:depth=11,image=32", "inception-v3", "resnet50"}) {
    auto ok = check_layer_chain(load(spec));
    EXPECT_TRUE(ok) << spec << ": " << (ok ? "" : ok.error().message);
  }
  auto m = load("resnet:depth=18,width=8,image=32");
  // layer1.1's residual sum reads layer1.0's output; make it read layer1.0's first ReLU (the
  // same shape: layer1.0 keeps its input's).
  auto index = [&](const std::string& name) {
    for (std::size_t l = 0; l < m.layers.size(); ++l)
      if (m.layers[l].name == name) return static_cast<int>(l);
    return -1;
  };
  const int l0 = index("layer1.0"), l1 = index("layer1.1");
  ASSERT_GE(l0, 0);
  ASSERT_GE(l1, 0);
  const model::Layer& before = m.layers[static_cast<std::size_t>(l0)];
  const int last = before.first_op + before.num_ops - 1;
  int relu = -1;
  for (int o = before.first_op; o <= last && relu < 0; ++o)
    if (m.ops[static_cast<std::size_t>(o)].compute.fn == model::OpFn::relu) relu = o;
  bool moved = false;
  const model::Layer& layer = m.layers[static_cast<std::size_t>(l1)];
  for (int o = layer.first_op; o < layer.first_op + layer.num_ops; ++o)
    for (int& in : m.ops[static_cast<std::size_t>(o)].inputs)
      if (in == last && m.ops[static_cast<std::size_t>(o)].compute.fn == model::OpFn::add)
        in = relu, moved = true;
  ASSERT_TRUE(moved);
  ASSERT_TRUE(check_op_graph(m));
  auto ok = check_layer_chain(m);
  ASSERT_FALSE(ok);
  EXPECT_NE(ok.error().message.find("of layer \"layer1.1\" reads op \"" +
                                    m.ops[static_cast<std::size_t>(relu)].name + "\""),
            std::string::npos)
      << ok.error().message;
}

// Every op of Inception-v3 (branches, concatenations, average pools, dropout), of a VGG, a ResNet,
// a ViT (patches, class token and positions, the classifier on the class token) and a BERT
// (attention, layernorms, the tied MLM decoder or a classifier alone, the pooler on the first
// token) run on two samples: each output has the shape the description gives, and each loss is a
// scalar.
TEST(OpGraph, OutputsHaveTheDescribedShapes) {
  for (const char* spec : {"inception:image=75,classes=10", "vgg:depth=11,image=32,classes=10",
                           "resnet:depth=50,width=8,image=32,classes=10",
                           "bert:layers=2,hidden=32,heads=4,seq=16,vocab=64",
                           "bert:layers=2,hidden=32,heads=4,seq=16,vocab=64,head=classification,"
                           "labels=3",
                           "gpt:layers=2,hidden=32,heads=4,seq=16,vocab=64",
                           "vit:layers=2,hidden=32,heads=4,image=32,patch=8,classes=10"}) {
    const auto m = load(spec);
    ASSERT_TRUE(check_op_graph(m));
    torch::manual_seed(1);
    OpGraph g(m);
    std::int64_t params = 0;
    std::set<const void*> seen;  // a tied weight counts once
    for (std::size_t o = 0; o < m.ops.size(); ++o)
      for (const auto& t : g.op_parameters(static_cast<int>(o)))
        if (seen.insert(t.unsafeGetTensorImpl()).second) params += t.numel();
    EXPECT_EQ(params, m.parameters()) << spec;
    torch::NoGradGuard no_grad;
    const bool bert = m.family == model::Family::encoder;
    const bool gpt = m.family == model::Family::decoder_lm;
    const torch::Tensor inputs = bert || gpt
                                     ? torch::randint(0, m.vocab, {2, m.seq_len}, torch::kLong)
                                     : torch::randn({2, 3, m.image_size, m.image_size});
    // BERT: a label per token (-100 where none) and the next-sentence label last.
    const torch::Tensor targets =
        bert  ? torch::cat({torch::randint(0, m.vocab, {2, m.seq_len}, torch::kLong),
                            torch::tensor({{0}, {1}}, torch::kLong)},
                           1)
        : gpt ? torch::randint(0, m.vocab, {2, m.seq_len}, torch::kLong)
              : torch::tensor({1, 3}, torch::kLong);
    std::vector<torch::Tensor> out(m.ops.size());
    for (std::size_t o = 0; o < m.ops.size(); ++o) {
      const model::Op& op = m.ops[o];
      std::vector<torch::Tensor> in;
      for (int p : op.inputs) in.push_back(out[static_cast<std::size_t>(p)]);
      if (in.empty()) in.push_back(inputs);
      torch::Tensor mask;
      if (op.compute.fn == model::OpFn::dropout)
        mask = torch::ones(g.output_shape(static_cast<int>(o), 2));
      out[o] = g.apply(static_cast<int>(o), in, targets, nullptr, mask);
      if (op.compute.fn == model::OpFn::cross_entropy) {
        EXPECT_EQ(out[o].dim(), 0) << spec << " " << op.name;
        EXPECT_TRUE(std::isfinite(out[o].item<double>())) << spec << " " << op.name;
      } else {
        EXPECT_EQ(out[o].sizes().vec(), g.output_shape(static_cast<int>(o), 2))
            << spec << " " << op.name;
      }
    }
  }
}

// The stage modules of BERT and a ViT draw their weights as the op graph draws the description's
// and compute the same function: from the same seed, the same loss on the same batch (the op
// graph without dropout, as both train).
TEST(OpGraph, StageModulesComputeTheOpGraphsLoss) {
  for (const char* spec : {"bert:layers=2,hidden=32,heads=4,seq=16,vocab=64",
                           "vit:layers=2,hidden=32,heads=4,image=32,patch=8,classes=10"}) {
    SCOPED_TRACE(spec);
    const auto m = load(spec);
    const bool bert = m.family == model::Family::encoder;
    torch::manual_seed(3);
    const torch::Tensor inputs = bert ? torch::randint(0, m.vocab, {2, m.seq_len}, torch::kLong)
                                      : torch::randn({2, 3, m.image_size, m.image_size});
    torch::Tensor targets =
        bert ? torch::cat({torch::randint(0, m.vocab, {2, m.seq_len}, torch::kLong),
                           torch::tensor({{0}, {1}}, torch::kLong)},
                          1)
             : torch::tensor({1, 3}, torch::kLong);
    if (bert) targets.slice(1, 0, 5).fill_(-100);  // tokens without a label
    torch::manual_seed(1);
    OpGraph g(m);
    torch::manual_seed(1);
    auto mod = build_module(m);
    ASSERT_TRUE(mod) << mod.error().message;
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> out(m.ops.size());
    torch::Tensor loss = torch::zeros({});
    for (std::size_t o = 0; o < m.ops.size(); ++o) {
      std::vector<torch::Tensor> in;
      for (int p : m.ops[o].inputs) in.push_back(out[static_cast<std::size_t>(p)]);
      if (in.empty()) in.push_back(inputs);
      out[o] = g.apply(static_cast<int>(o), in, targets, nullptr, torch::Tensor());
      if (m.ops[o].compute.fn == model::OpFn::cross_entropy) loss = loss + out[o];
    }
    const double module_loss = (*mod)->loss_sum(Batch{inputs, targets}).item<double>();
    EXPECT_NEAR(module_loss, loss.item<double>(), 1e-5 * std::abs(loss.item<double>()));
  }
}

// BERT's ops compute what a textbook encoder layer does: attention from the QKV projection's
// thirds, softmax over keys, probabilities times V, and the pooler on the first token.
TEST(OpGraph, BertAttentionIsScaledDotProductAttention) {
  const auto m = load("bert:layers=1,hidden=8,heads=2,seq=4,vocab=16");
  torch::manual_seed(2);
  OpGraph g(m);
  auto index = [&](const std::string& name) {
    for (std::size_t o = 0; o < m.ops.size(); ++o)
      if (m.ops[o].name == name) return static_cast<int>(o);
    ADD_FAILURE() << name;
    return 0;
  };
  torch::NoGradGuard no_grad;
  const torch::Tensor qkv = torch::randn({3, 4, 24});
  const torch::Tensor none;
  const torch::Tensor scores = g.apply(index("layers.0.attn.scores"), {qkv}, none, nullptr, none);
  const torch::Tensor probs =
      g.apply(index("layers.0.attn.softmax"), {scores}, none, nullptr, none);
  const torch::Tensor ctx =
      g.apply(index("layers.0.attn.context"), {probs, qkv}, none, nullptr, none);
  // By hand, head by head: Q, K, V are the thirds of each token's 24 features, 4 per head.
  for (std::int64_t h = 0; h < 2; ++h) {
    const torch::Tensor q = qkv.slice(2, 4 * h, 4 * h + 4), k = qkv.slice(2, 8 + 4 * h, 12 + 4 * h),
                        v = qkv.slice(2, 16 + 4 * h, 20 + 4 * h);
    const torch::Tensor p = torch::softmax(q.matmul(k.transpose(1, 2)) / 2.0, -1);
    EXPECT_TRUE(torch::allclose(probs.select(1, h), p, 1e-6, 1e-6));
    EXPECT_TRUE(torch::allclose(ctx.slice(2, 4 * h, 4 * h + 4), p.matmul(v), 1e-6, 1e-6));
  }
  const int pooler = index("head.pooler");
  const torch::Tensor x = torch::randn({3, 4, 8});
  const auto& w = g.op_parameters(pooler);
  EXPECT_TRUE(torch::allclose(g.apply(pooler, {x}, none, nullptr, none),
                              torch::linear(x.select(1, 0), w[0], w[1])));
  // The MLM decoder reads the word table itself.
  EXPECT_TRUE(g.op_parameters(index("head.mlm.decoder"))[0].is_same(
      g.op_parameters(index("embedding.word"))[0]));
}

}  // namespace
}  // namespace hetplan::runtime::detail
