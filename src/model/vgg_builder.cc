#include <string>
#include <vector>

#include "builders.h"
#include "cnn_parts.h"

namespace hetplan::model::detail {
namespace {

constexpr double kDrop = 0.5;  // torchvision's classifier dropout

// Convolution widths per block (Simonyan and Zisserman 2015, table 1: A, B, D, E).
std::vector<std::vector<std::int64_t>> vgg_blocks(int depth) {
  const int per_block_deep = depth == 19 ? 4 : depth == 16 ? 3 : 2;
  const int per_block_shallow = depth == 11 ? 1 : 2;
  std::vector<std::vector<std::int64_t>> blocks;
  const std::int64_t widths[] = {64, 128, 256, 512, 512};
  for (int b = 0; b < 5; ++b) {
    const int n = b < 2 ? per_block_shallow : per_block_deep;
    blocks.emplace_back(static_cast<std::size_t>(n), widths[b]);
  }
  return blocks;
}

}  // namespace

// VGG (torchvision layout): five conv blocks, adaptive pooling to 7x7, then fc6 and fc7 (4096,
// ReLU, dropout) and the classifier. fc6 and fc7 are column- then row-split, Megatron style.
Model build_vgg(const VggConfig& c) {
  Model m;
  m.family = Family::cnn;
  m.image_size = static_cast<int>(c.image);
  m.num_classes = static_cast<int>(c.classes);
  m.num_blocks = 5;
  m.dtype = c.dtype;
  GraphBuilder g(m);
  const double act = g.act();

  Feature x{-1, 3, c.image, c.image};
  const auto blocks = vgg_blocks(c.depth);
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    const std::string name = "block" + std::to_string(b + 1);
    g.begin_layer(name, LayerKind::conv_block);
    for (std::size_t i = 0; i < blocks[b].size(); ++i) {
      ConvSpec conv = conv_spec(blocks[b][i], 3, 1, 1);
      conv.bias = true;
      const std::string cname = name + ".conv" + std::to_string(i + 1);
      x = add_relu(g, cname + ".relu", add_conv(g, cname, x, conv));
    }
    x = add_pool(g, name + ".maxpool", x, 2, 2, 0, true);
  }

  g.begin_layer("fc6", LayerKind::other);
  const int pooled = add_adaptive_avgpool(g, "fc6.avgpool", x, 7, 7).op;
  Op fc6 = linear("fc6.fc", {pooled}, act, 1, 512 * 7 * 7, 4096, true, ShardKind::column);
  fc6.saved_bytes = act * 512 * 7 * 7;
  fc6.compute = linear_compute(4096);
  int y = g.add(std::move(fc6));
  Op relu6 =
      pointwise("fc6.relu", OpKind::elementwise, ShardKind::heads, {y}, act, 4096, kReluFlops);
  relu6.saved_bytes = act * 4096;
  relu6.compute.fn = OpFn::relu;
  relu6.compute.shape = {4096};
  y = g.add(std::move(relu6));
  Op drop6 = dropout("fc6.dropout", ShardKind::heads, {y}, act, 4096);
  drop6.compute = dropout_compute(4096, kDrop);
  y = g.add(std::move(drop6));

  g.begin_layer("fc7", LayerKind::other);
  Op fc7 = linear("fc7.fc", {y}, act, 1, 4096, 4096, true, ShardKind::row);
  fc7.saved_bytes = act * 4096;
  fc7.compute = linear_compute(4096);
  y = g.add(std::move(fc7));
  Op relu7 =
      pointwise("fc7.relu", OpKind::elementwise, ShardKind::replicated, {y}, act, 4096, kReluFlops);
  relu7.saved_bytes = act * 4096;
  relu7.compute.fn = OpFn::relu;
  relu7.compute.shape = {4096};
  y = g.add(std::move(relu7));
  Op drop7 = dropout("fc7.dropout", ShardKind::replicated, {y}, act, 4096);
  drop7.compute = dropout_compute(4096, kDrop);
  y = g.add(std::move(drop7));

  g.begin_layer("head", LayerKind::head);
  add_classifier(g, "head", Feature{y, 4096, 1, 1}, c.classes);
  return m;
}

}  // namespace hetplan::model::detail
