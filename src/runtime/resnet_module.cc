#include "resnet_module.h"

#include <fmt/format.h>

#include <cstdio>
#include <optional>

namespace hetplan::runtime::detail {
namespace {

namespace nn = torch::nn;

// One block as the description lays it out.
struct BlockShape {
  std::int64_t in = 0, width = 0, out = 0, stride = 1;
  bool bottleneck = false, project = false;
};

nn::Conv2d conv(std::int64_t in, std::int64_t out, std::int64_t k, std::int64_t stride,
                std::int64_t pad) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, k).stride(stride).padding(pad).bias(false));
}

// Batch normalisation whose statistics cover the samples of every replica of the stage.
class BatchNorm : public nn::Module {
 public:
  explicit BatchNorm(std::int64_t c)
      : weight_(register_parameter("weight", torch::ones({c}))),
        bias_(register_parameter("bias", torch::zeros({c}))) {}
  torch::Tensor forward(const torch::Tensor& x, Collectives* group) const {
    return batch_norm_over_group(x, weight_, bias_, group);
  }

 private:
  torch::Tensor weight_, bias_;
};

// conv 7x7 stride 2, batchnorm, ReLU, max-pool 3x3 stride 2.
class Stem : public nn::Module {
 public:
  explicit Stem(std::int64_t width)
      : conv_(register_module("conv", conv(3, width, 7, 2, 3))),
        bn_(register_module("bn", std::make_shared<BatchNorm>(width))) {}
  torch::Tensor forward(const torch::Tensor& x, Collectives* group) {
    return torch::max_pool2d(torch::relu(bn_->forward(conv_->forward(x), group)), 3, 2, 1);
  }

 private:
  nn::Conv2d conv_;
  std::shared_ptr<BatchNorm> bn_;
};

// torchvision's BasicBlock (two 3x3) or Bottleneck (1x1, 3x3 with the stride, 1x1), with a
// projected shortcut where the shape changes.
class Block : public nn::Module {
 public:
  explicit Block(const BlockShape& b) : shape_(b) {
    if (b.bottleneck) {
      add(conv(b.in, b.width, 1, 1, 0), b.width);
      add(conv(b.width, b.width, 3, b.stride, 1), b.width);
      add(conv(b.width, b.out, 1, 1, 0), b.out);
    } else {
      add(conv(b.in, b.width, 3, b.stride, 1), b.width);
      add(conv(b.width, b.out, 3, 1, 1), b.out);
    }
    if (b.project) {
      down_ = register_module("downsample", conv(b.in, b.out, 1, b.stride, 0));
      down_bn_ = register_module("downsample_bn", std::make_shared<BatchNorm>(b.out));
    }
  }
  torch::Tensor forward(const torch::Tensor& x, Collectives* group) {
    torch::Tensor y = x;
    for (std::size_t i = 0; i < convs_.size(); ++i) {
      y = bns_[i]->forward(convs_[i]->forward(y), group);
      if (i + 1 < convs_.size()) y = torch::relu(y);
    }
    const torch::Tensor skip = shape_.project ? down_bn_->forward(down_->forward(x), group) : x;
    return torch::relu(y + skip);
  }

 private:
  void add(nn::Conv2d c, std::int64_t channels) {
    const std::string i = std::to_string(convs_.size() + 1);
    convs_.push_back(register_module("conv" + i, std::move(c)));
    bns_.push_back(register_module("bn" + i, std::make_shared<BatchNorm>(channels)));
  }
  BlockShape shape_;
  std::vector<nn::Conv2d> convs_;
  std::vector<std::shared_ptr<BatchNorm>> bns_;
  nn::Conv2d down_{nullptr};
  std::shared_ptr<BatchNorm> down_bn_;
};

// Layers: "stem", one per block, "head" (global average pooling, linear, cross-entropy).
// Under full recomputation a layer's batch statistics are reduced again in the backward pass, by
// every replica alike.
class ResNet : public ClassifierStack {
 public:
  ResNet(std::int64_t image, std::int64_t width, const std::vector<BlockShape>& blocks,
         std::int64_t classes) {
    stem_ = register_module("stem", std::make_shared<Stem>(width));
    for (std::size_t i = 0; i < blocks.size(); ++i)
      blocks_.push_back(
          register_module("block" + std::to_string(i), std::make_shared<Block>(blocks[i])));
    head_ = register_module("head", nn::Linear(blocks.back().out, classes));
    num_layers_ = static_cast<int>(blocks.size()) + 2;
    layer_fns_.push_back([this](const torch::Tensor& x) { return stem_->forward(x, group_); });
    for (std::size_t i = 0; i < blocks_.size(); ++i)
      layer_fns_.push_back(
          [this, i](const torch::Tensor& x) { return blocks_[i]->forward(x, group_); });
    // Each layer's input shape, from one sample through every layer but the head.
    torch::NoGradGuard no_grad;
    torch::Tensor x = torch::zeros({1, 3, image, image});
    for (const auto& f : layer_fns_) {
      input_shapes_.push_back(x.sizes().vec());
      x = f(x);
    }
    input_shapes_.push_back(x.sizes().vec());
  }
  void set_batch_group(Collectives* group) override { group_ = group; }
  std::vector<std::int64_t> activation_shape(int layer, std::int64_t n) const override {
    auto shape = input_shapes_.at(static_cast<std::size_t>(layer));
    shape[0] = n;
    return shape;
  }

 private:
  const nn::Module& layer_module(int l) const override {
    if (l == 0) return *stem_;
    if (l + 1 < num_layers_) return *blocks_[static_cast<std::size_t>(l - 1)];
    return *head_;
  }
  // Global average pooling, then the linear classifier.
  torch::Tensor logits(const torch::Tensor& x) override { return head_->forward(x.mean({2, 3})); }

  std::shared_ptr<Stem> stem_;
  std::vector<std::shared_ptr<Block>> blocks_;
  nn::Linear head_{nullptr};
  std::vector<std::vector<std::int64_t>> input_shapes_;
  Collectives* group_ = nullptr;
};

// The conv op named `name` among layer l's ops.
const model::Op* conv_in(const model::Model& m, const model::Layer& l, const std::string& name) {
  for (int i = l.first_op; i < l.first_op + l.num_ops; ++i)
    if (m.ops[static_cast<std::size_t>(i)].name == name &&
        m.ops[static_cast<std::size_t>(i)].kind == model::OpKind::conv2d)
      return &m.ops[static_cast<std::size_t>(i)];
  return nullptr;
}

// The description's blocks, and the stem's width.
Result<std::pair<std::int64_t, std::vector<BlockShape>>> resnet_shape(const model::Model& m) {
  const Error not_resnet{fmt::format(
      "--model: {}: the runtime has a stage module for ResNets among CNNs; this model's layers "
      "are not a ResNet's (stem, blocks layer<s>.<i>, head), so its plans run op by op where "
      "they convert",
      m.name)};
  if (m.layers.size() < 3 || m.layers.front().name != "stem" || m.layers.back().name != "head")
    return not_resnet;
  const model::Op* stem = conv_in(m, m.layers.front(), "stem.conv");
  if (!stem) return not_resnet;
  const std::int64_t width0 = stem->gemm.n;
  std::vector<BlockShape> blocks;
  std::int64_t channels = width0;
  for (std::size_t l = 1; l + 1 < m.layers.size(); ++l) {
    const std::string& name = m.layers[l].name;
    int stage = 0, index = 0;
    if (std::sscanf(name.c_str(), "layer%d.%d", &stage, &index) != 2 || stage < 1)
      return not_resnet;
    const model::Op* c1 = conv_in(m, m.layers[l], name + ".1.conv");
    const model::Op* c2 = conv_in(m, m.layers[l], name + ".2.conv");
    const model::Op* c3 = conv_in(m, m.layers[l], name + ".3.conv");
    if (!c1 || !c2) return not_resnet;
    BlockShape b;
    b.in = channels;
    b.width = c1->gemm.n;
    b.bottleneck = c3 != nullptr;
    b.out = (b.bottleneck ? c3 : c2)->gemm.n;
    b.stride = index == 0 && stage > 1 ? 2 : 1;
    b.project = conv_in(m, m.layers[l], name + ".downsample.conv") != nullptr;
    blocks.push_back(b);
    channels = b.out;
  }
  return std::make_pair(width0, blocks);
}

}  // namespace

Result<bool> check_resnet(const model::Model& m) {
  if (auto shape = resnet_shape(m); !shape) return shape.error();
  return true;
}

Result<std::shared_ptr<TrainModule>> build_resnet_module(const model::Model& m) {
  auto shape = resnet_shape(m);
  if (!shape) return shape.error();
  return std::shared_ptr<TrainModule>(
      std::make_shared<ResNet>(m.image_size, shape->first, shape->second, m.num_classes));
}

}  // namespace hetplan::runtime::detail
