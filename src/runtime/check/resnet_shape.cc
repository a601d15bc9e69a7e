#include "resnet_shape.h"

#include <fmt/format.h>

#include <cstdio>
#include <string>

namespace hetplan::runtime::detail {
namespace {

// The conv op named `name` among layer l's ops.
const model::Op* conv_in(const model::Model& m, const model::Layer& l, const std::string& name) {
  for (int i = l.first_op; i < l.first_op + l.num_ops; ++i)
    if (m.ops[static_cast<std::size_t>(i)].name == name &&
        m.ops[static_cast<std::size_t>(i)].kind == model::OpKind::conv2d)
      return &m.ops[static_cast<std::size_t>(i)];
  return nullptr;
}

}  // namespace

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

Result<bool> check_resnet(const model::Model& m) {
  if (auto shape = resnet_shape(m); !shape) return shape.error();
  return true;
}

}  // namespace hetplan::runtime::detail
