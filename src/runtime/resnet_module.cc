#include "resnet_module.h"

#include <fmt/format.h>

#include <cstdio>
#include <optional>

namespace hetplan::runtime::detail {
namespace {

namespace nn = torch::nn;

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

}  // namespace

Result<std::shared_ptr<TrainModule>> build_resnet_module(const model::Model& m) {
  auto shape = resnet_shape(m);
  if (!shape) return shape.error();
  return std::shared_ptr<TrainModule>(
      std::make_shared<ResNet>(m.image_size, shape->first, shape->second, m.num_classes));
}

}  // namespace hetplan::runtime::detail
