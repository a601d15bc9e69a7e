// The op-by-op executor's graph: the zoo's CNNs say what each op computes, and libtorch's ops
// give exactly the shapes the descriptions claim.
#include "../../src/runtime/op_graph.h"

#include <gtest/gtest.h>

#include "hetplan/model/zoo.h"

namespace hetplan::runtime::detail {
namespace {

model::Model load(const std::string& spec) {
  auto m = model::load_model(spec);
  EXPECT_TRUE(m) << (m ? "" : m.error().message);
  return *m;
}

TEST(OpGraph, TheZoosCnnsAndMlpsSayWhatEveryOpComputes) {
  for (const char* spec :
       {"mlp:layers=2,hidden=8,in=4,out=3", "resnet50", "resnet:depth=18,width=8,image=32", "vgg16",
        "vgg:depth=11,image=32", "inception-v3", "inception:image=75"}) {
    const auto m = load(spec);
    auto ok = check_op_graph(m);
    EXPECT_TRUE(ok) << spec << ": " << (ok ? "" : ok.error().message);
  }
}

TEST(OpGraph, ModelsWithoutComputeAreRefusedByName) {
  auto ok = check_op_graph(load("gpt:layers=2,hidden=64,heads=4,seq=32,vocab=256"));
  ASSERT_FALSE(ok);
  EXPECT_NE(ok.error().message.find("op \"embedding."), std::string::npos) << ok.error().message;
  EXPECT_NE(ok.error().message.find("the zoo's mlp, resnet, vgg and inception"), std::string::npos);
  // A description whose shapes do not fit: a convolution claiming one channel too many.
  auto m = load("resnet:depth=18,width=8,image=32");
  m.ops[0].compute.shape[0] += 1;
  ok = check_op_graph(m);
  ASSERT_FALSE(ok);
  EXPECT_NE(ok.error().message.find("op \"stem.conv\" cannot be executed op by op"),
            std::string::npos)
      << ok.error().message;
}

// Every op of Inception-v3 (branches, concatenations, average pools, dropout) and of a VGG run on
// two samples: each output has the shape the description gives, and the loss is a scalar.
TEST(OpGraph, OutputsHaveTheDescribedShapes) {
  for (const char* spec : {"inception:image=75,classes=10", "vgg:depth=11,image=32,classes=10",
                           "resnet:depth=50,width=8,image=32,classes=10"}) {
    const auto m = load(spec);
    ASSERT_TRUE(check_op_graph(m));
    torch::manual_seed(1);
    OpGraph g(m);
    std::int64_t params = 0;
    for (std::size_t o = 0; o < m.ops.size(); ++o)
      for (const auto& t : g.op_parameters(static_cast<int>(o))) params += t.numel();
    EXPECT_EQ(params, m.parameters()) << spec;
    torch::NoGradGuard no_grad;
    const torch::Tensor images = torch::randn({2, 3, m.image_size, m.image_size});
    const torch::Tensor targets = torch::tensor({1, 3}, torch::kLong);
    std::vector<torch::Tensor> out(m.ops.size());
    for (std::size_t o = 0; o < m.ops.size(); ++o) {
      const model::Op& op = m.ops[o];
      std::vector<torch::Tensor> in;
      for (int p : op.inputs) in.push_back(out[static_cast<std::size_t>(p)]);
      if (in.empty()) in.push_back(images);
      torch::Tensor mask;
      if (op.compute.fn == model::OpFn::dropout)
        mask = torch::ones(g.output_shape(static_cast<int>(o), 2));
      out[o] = g.apply(static_cast<int>(o), in, targets, nullptr, mask);
      if (op.compute.fn == model::OpFn::cross_entropy)
        EXPECT_EQ(out[o].dim(), 0) << spec << " " << op.name;
      else
        EXPECT_EQ(out[o].sizes().vec(), g.output_shape(static_cast<int>(o), 2))
            << spec << " " << op.name;
    }
  }
}

}  // namespace
}  // namespace hetplan::runtime::detail
