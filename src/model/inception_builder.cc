#include <string>

#include "builders.h"
#include "cnn_parts.h"

namespace hetplan::model::detail {
namespace {

// The modules of Inception-v3 as torchvision builds them (Szegedy et al. 2016, figures 5-7);
// every convolution is BasicConv2d: conv without bias, batchnorm, ReLU.
struct Inception {
  GraphBuilder& g;
  std::string p;  // module name

  Feature conv(const std::string& n, const Feature& in, const ConvSpec& c) {
    return add_conv_bn(g, p + "." + n, in, c);
  }
  Feature avg_branch(const Feature& in, std::int64_t out) {
    return conv("branch_pool", add_pool(g, p + ".branch_pool.avgpool", in, 3, 1, 1, false),
                conv_spec(out, 1));
  }

  Feature module_a(const Feature& in, std::int64_t pool_features) {
    const Feature b1 = conv("branch1x1", in, conv_spec(64, 1));
    const Feature b5 =
        conv("branch5x5_2", conv("branch5x5_1", in, conv_spec(48, 1)), conv_spec(64, 5, 1, 2));
    Feature b3 = conv("branch3x3dbl_1", in, conv_spec(64, 1));
    b3 = conv("branch3x3dbl_3", conv("branch3x3dbl_2", b3, conv_spec(96, 3, 1, 1)),
              conv_spec(96, 3, 1, 1));
    return add_concat(g, p + ".concat", {b1, b5, b3, avg_branch(in, pool_features)});
  }

  Feature module_b(const Feature& in) {
    const Feature b3 = conv("branch3x3", in, conv_spec(384, 3, 2));
    Feature dbl = conv("branch3x3dbl_1", in, conv_spec(64, 1));
    dbl = conv("branch3x3dbl_3", conv("branch3x3dbl_2", dbl, conv_spec(96, 3, 1, 1)),
               conv_spec(96, 3, 2));
    return add_concat(g, p + ".concat",
                      {b3, dbl, add_pool(g, p + ".branch_pool", in, 3, 2, 0, true)});
  }

  Feature module_c(const Feature& in, std::int64_t c7) {
    const Feature b1 = conv("branch1x1", in, conv_spec(192, 1));
    Feature b7 = conv("branch7x7_1", in, conv_spec(c7, 1));
    b7 = conv("branch7x7_3", conv("branch7x7_2", b7, conv_rect(c7, 1, 7)), conv_rect(192, 7, 1));
    Feature dbl = conv("branch7x7dbl_1", in, conv_spec(c7, 1));
    dbl = conv("branch7x7dbl_3", conv("branch7x7dbl_2", dbl, conv_rect(c7, 7, 1)),
               conv_rect(c7, 1, 7));
    dbl = conv("branch7x7dbl_5", conv("branch7x7dbl_4", dbl, conv_rect(c7, 7, 1)),
               conv_rect(192, 1, 7));
    return add_concat(g, p + ".concat", {b1, b7, dbl, avg_branch(in, 192)});
  }

  Feature module_d(const Feature& in) {
    const Feature b3 =
        conv("branch3x3_2", conv("branch3x3_1", in, conv_spec(192, 1)), conv_spec(320, 3, 2));
    Feature b7 = conv("branch7x7x3_1", in, conv_spec(192, 1));
    b7 = conv("branch7x7x3_3", conv("branch7x7x3_2", b7, conv_rect(192, 1, 7)),
              conv_rect(192, 7, 1));
    b7 = conv("branch7x7x3_4", b7, conv_spec(192, 3, 2));
    return add_concat(g, p + ".concat",
                      {b3, b7, add_pool(g, p + ".branch_pool", in, 3, 2, 0, true)});
  }

  Feature module_e(const Feature& in) {
    const Feature b1 = conv("branch1x1", in, conv_spec(320, 1));
    const Feature b3 = conv("branch3x3_1", in, conv_spec(384, 1));
    const Feature b3a = conv("branch3x3_2a", b3, conv_rect(384, 1, 3));
    const Feature b3b = conv("branch3x3_2b", b3, conv_rect(384, 3, 1));
    Feature dbl = conv("branch3x3dbl_2", conv("branch3x3dbl_1", in, conv_spec(448, 1)),
                       conv_spec(384, 3, 1, 1));
    const Feature da = conv("branch3x3dbl_3a", dbl, conv_rect(384, 1, 3));
    const Feature db = conv("branch3x3dbl_3b", dbl, conv_rect(384, 3, 1));
    return add_concat(g, p + ".concat", {b1, b3a, b3b, da, db, avg_branch(in, 192)});
  }
};

}  // namespace

// Inception-v3 without the auxiliary classifier (it only adds a training loss; torchvision's
// count with it is 27.2M, without it 23.8M, the published figure).
Model build_inception_v3(const InceptionConfig& c) {
  Model m;
  m.family = Family::cnn;
  m.image_size = static_cast<int>(c.image);
  m.num_classes = static_cast<int>(c.classes);
  m.num_blocks = 11;
  m.dtype = c.dtype;
  GraphBuilder g(m);

  g.begin_layer("stem", LayerKind::conv_block);
  Feature x{-1, 3, c.image, c.image};
  x = add_conv_bn(g, "stem.conv1a", x, conv_spec(32, 3, 2));
  x = add_conv_bn(g, "stem.conv2a", x, conv_spec(32, 3));
  x = add_conv_bn(g, "stem.conv2b", x, conv_spec(64, 3, 1, 1));
  x = add_pool(g, "stem.maxpool1", x, 3, 2, 0, true);
  x = add_conv_bn(g, "stem.conv3b", x, conv_spec(80, 1));
  x = add_conv_bn(g, "stem.conv4a", x, conv_spec(192, 3));
  x = add_pool(g, "stem.maxpool2", x, 3, 2, 0, true);

  auto module = [&](const std::string& name) {
    g.begin_layer(name, LayerKind::conv_block);
    return Inception{g, name};
  };
  x = module("mixed_5b").module_a(x, 32);
  x = module("mixed_5c").module_a(x, 64);
  x = module("mixed_5d").module_a(x, 64);
  x = module("mixed_6a").module_b(x);
  x = module("mixed_6b").module_c(x, 128);
  x = module("mixed_6c").module_c(x, 160);
  x = module("mixed_6d").module_c(x, 160);
  x = module("mixed_6e").module_c(x, 192);
  x = module("mixed_7a").module_d(x);
  x = module("mixed_7b").module_e(x);
  x = module("mixed_7c").module_e(x);

  g.begin_layer("head", LayerKind::head);
  x = add_adaptive_avgpool(g, "head.avgpool", x, 1, 1);
  Op drop = dropout("head.dropout", ShardKind::replicated, {x.op}, g.act(), x.elements());
  drop.compute = dropout_compute(x.c, 0.5);  // torchvision's
  drop.compute.shape = {x.c, 1, 1};
  x.op = g.add(std::move(drop));
  add_classifier(g, "head", x, c.classes);
  return m;
}

}  // namespace hetplan::model::detail
