#include <array>
#include <string>

#include "builders.h"
#include "cnn_parts.h"

namespace hetplan::model::detail {

// ResNet v1.5 (torchvision): basic blocks of two 3x3 convolutions (depths 18 and 34) or
// bottleneck blocks with the stride on the 3x3 convolution (50, 101, 152); one layer per block,
// plus "stem" and "head". `width` is the first stage's width (64 in the published models).
Model build_resnet(const ResnetConfig& c) {
  std::array<int, 4> blocks{3, 4, 6, 3};
  if (c.depth == 18) blocks = {2, 2, 2, 2};
  if (c.depth == 101) blocks = {3, 4, 23, 3};
  if (c.depth == 152) blocks = {3, 8, 36, 3};
  const bool basic = c.depth < 50;
  const std::int64_t expansion = basic ? 1 : 4;
  Model m;
  m.family = Family::cnn;
  m.image_size = static_cast<int>(c.image);
  m.num_classes = static_cast<int>(c.classes);
  m.num_blocks = blocks[0] + blocks[1] + blocks[2] + blocks[3];
  m.dtype = c.dtype;
  GraphBuilder g(m);

  g.begin_layer("stem", LayerKind::conv_block);
  Feature x{-1, 3, c.image, c.image};
  x = add_conv_bn(g, "stem", x, conv_spec(c.width, 7, 2, 3));
  x = add_pool(g, "stem.maxpool", x, 3, 2, 1, true);

  for (int stage = 0; stage < 4; ++stage) {
    const std::int64_t width = c.width << stage;
    for (int i = 0; i < blocks[static_cast<std::size_t>(stage)]; ++i) {
      const std::string name = "layer" + std::to_string(stage + 1) + "." + std::to_string(i);
      const std::int64_t stride = (i == 0 && stage > 0) ? 2 : 1;
      g.begin_layer(name, LayerKind::conv_block);
      Feature y;
      if (basic) {
        y = add_conv_bn(g, name + ".1", x, conv_spec(width, 3, stride, 1));
        y = add_conv_bn(g, name + ".2", y, conv_spec(width, 3, 1, 1), false);
      } else {
        y = add_conv_bn(g, name + ".1", x, conv_spec(width, 1));
        y = add_conv_bn(g, name + ".2", y, conv_spec(width, 3, stride, 1));
        y = add_conv_bn(g, name + ".3", y, conv_spec(expansion * width, 1), false);
      }
      const bool project = stride != 1 || x.c != expansion * width;
      const Feature skip = project ? add_conv_bn(g, name + ".downsample", x,
                                                 conv_spec(expansion * width, 1, stride), false)
                                   : x;
      x = add_relu(g, name + ".relu", add_sum(g, name + ".residual", y, skip));
    }
  }

  g.begin_layer("head", LayerKind::head);
  add_classifier(g, "head", add_adaptive_avgpool(g, "head.avgpool", x, 1, 1), c.classes);
  return m;
}

}  // namespace hetplan::model::detail
