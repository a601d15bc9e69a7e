// Convolutional building blocks: each adds ops and tracks the output's [channels x h x w] shape.
// Conventions: a convolution keeps its input for the weight gradient, batchnorm its input, ReLU
// its output, max-pooling its input; average pooling, concatenation and residual adds keep
// nothing. FLOPs count a multiply-add as 2 (ResNet-50's 4.1 G multiply-adds are 8.2 GFLOPs).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph_builder.h"

namespace hetplan::model::detail {

struct Feature {
  int op = -1;  // the producing op; -1 for the input image
  std::int64_t c = 0, h = 0, w = 0;
  double elements() const {
    return static_cast<double>(c) * static_cast<double>(h) * static_cast<double>(w);
  }
};

struct ConvSpec {
  std::int64_t out = 0, kh = 1, kw = 1, stride = 1, pad_h = 0, pad_w = 0;
  bool bias = false;
};
// Square kernel k, stride, padding.
ConvSpec conv_spec(std::int64_t out, std::int64_t k, std::int64_t stride = 1, std::int64_t pad = 0);
// Rectangular kernel kh x kw with "same" padding (Inception's 1x7, 7x1, 1x3, 3x1).
ConvSpec conv_rect(std::int64_t out, std::int64_t kh, std::int64_t kw);

Feature add_conv(GraphBuilder& g, const std::string& name, const Feature& in, const ConvSpec& c);
Feature add_batchnorm(GraphBuilder& g, const std::string& name, const Feature& in);
Feature add_relu(GraphBuilder& g, const std::string& name, const Feature& in);
// conv (no bias) + batchnorm (+ ReLU): torchvision's BasicConv2d and ResNet's conv-bn pairs.
Feature add_conv_bn(GraphBuilder& g, const std::string& name, const Feature& in, const ConvSpec& c,
                    bool relu = true);
Feature add_pool(GraphBuilder& g, const std::string& name, const Feature& in, std::int64_t k,
                 std::int64_t stride, std::int64_t pad, bool max);
// Adaptive average pooling to out_h x out_w (global pooling: 1 x 1).
Feature add_adaptive_avgpool(GraphBuilder& g, const std::string& name, const Feature& in,
                             std::int64_t out_h, std::int64_t out_w);
Feature add_concat(GraphBuilder& g, const std::string& name, const std::vector<Feature>& parts);
Feature add_sum(GraphBuilder& g, const std::string& name, const Feature& a, const Feature& b);
// What a linear layer with bias of `out` features computes, and a dropout of `features` elements.
OpCompute linear_compute(std::int64_t out);
OpCompute dropout_compute(std::int64_t features, double drop);
// Linear classifier on a flattened feature and its cross-entropy loss.
void add_classifier(GraphBuilder& g, const std::string& prefix, const Feature& in,
                    std::int64_t classes);

}  // namespace hetplan::model::detail
