#include "cnn_parts.h"

namespace hetplan::model::detail {
namespace {

std::vector<int> inputs_of(const Feature& in) {
  return in.op < 0 ? std::vector<int>{} : std::vector<int>{in.op};
}

std::int64_t out_size(std::int64_t in, std::int64_t k, std::int64_t stride, std::int64_t pad) {
  return (in + 2 * pad - k) / stride + 1;
}

}  // namespace

ConvSpec conv_spec(std::int64_t out, std::int64_t k, std::int64_t stride, std::int64_t pad) {
  return ConvSpec{out, k, k, stride, pad, pad, false};
}

ConvSpec conv_rect(std::int64_t out, std::int64_t kh, std::int64_t kw) {
  return ConvSpec{out, kh, kw, 1, (kh - 1) / 2, (kw - 1) / 2, false};
}

Feature add_conv(GraphBuilder& g, const std::string& name, const Feature& in, const ConvSpec& c) {
  Feature out{-1, c.out, out_size(in.h, c.kh, c.stride, c.pad_h),
              out_size(in.w, c.kw, c.stride, c.pad_w)};
  // Implicit GEMM: [output pixels x (in * kh * kw)] * [(in * kh * kw) x out].
  Op op = linear(name, inputs_of(in), g.act(), out.h * out.w, in.c * c.kh * c.kw, c.out, c.bias,
                 ShardKind::channel);
  op.kind = OpKind::conv2d;
  op.bytes_read = g.act() * in.elements();
  op.saved_bytes = g.act() * in.elements();
  out.op = g.add(std::move(op));
  return out;
}

Feature add_batchnorm(GraphBuilder& g, const std::string& name, const Feature& in) {
  Op op = pointwise(name, OpKind::batchnorm, ShardKind::replicated, {in.op}, g.act(), in.elements(),
                    kBatchNormFlops);
  op.params = 2 * in.c;
  op.saved_bytes = g.act() * in.elements();
  Feature out = in;
  out.op = g.add(std::move(op));
  return out;
}

Feature add_relu(GraphBuilder& g, const std::string& name, const Feature& in) {
  Op op = pointwise(name, OpKind::elementwise, ShardKind::replicated, {in.op}, g.act(),
                    in.elements(), kReluFlops);
  op.saved_bytes = g.act() * in.elements();
  Feature out = in;
  out.op = g.add(std::move(op));
  return out;
}

Feature add_conv_bn(GraphBuilder& g, const std::string& name, const Feature& in, const ConvSpec& c,
                    bool relu) {
  Feature x = add_batchnorm(g, name + ".bn", add_conv(g, name + ".conv", in, c));
  return relu ? add_relu(g, name + ".relu", x) : x;
}

Feature add_pool(GraphBuilder& g, const std::string& name, const Feature& in, std::int64_t k,
                 std::int64_t stride, std::int64_t pad, bool max) {
  Feature out{-1, in.c, out_size(in.h, k, stride, pad), out_size(in.w, k, stride, pad)};
  Op op = pointwise(name, OpKind::pool, ShardKind::replicated, {in.op}, g.act(), out.elements(),
                    static_cast<double>(k * k));
  op.bytes_read = g.act() * in.elements();
  if (max) op.saved_bytes = g.act() * in.elements();
  out.op = g.add(std::move(op));
  return out;
}

Feature add_adaptive_avgpool(GraphBuilder& g, const std::string& name, const Feature& in,
                             std::int64_t out_h, std::int64_t out_w) {
  Feature out{-1, in.c, out_h, out_w};
  Op op = pointwise(name, OpKind::pool, ShardKind::replicated, {in.op}, g.act(), out.elements(), 0);
  op.flops = in.elements();  // every input element is added once
  op.bytes_read = g.act() * in.elements();
  out.op = g.add(std::move(op));
  return out;
}

Feature add_concat(GraphBuilder& g, const std::string& name, const std::vector<Feature>& parts) {
  Feature out{-1, 0, parts.front().h, parts.front().w};
  std::vector<int> inputs;
  for (const Feature& p : parts) {
    out.c += p.c;
    inputs.push_back(p.op);
  }
  out.op = g.add(pointwise(name, OpKind::elementwise, ShardKind::replicated, std::move(inputs),
                           g.act(), out.elements(), 0));
  return out;
}

Feature add_sum(GraphBuilder& g, const std::string& name, const Feature& a, const Feature& b) {
  Feature out = a;
  out.op = g.add(pointwise(name, OpKind::elementwise, ShardKind::replicated, {a.op, b.op}, g.act(),
                           a.elements(), kAddFlops, 2));
  return out;
}

void add_classifier(GraphBuilder& g, const std::string& prefix, const Feature& in,
                    std::int64_t classes) {
  const std::int64_t features = in.c * in.h * in.w;
  Op fc = linear(prefix + ".fc", {in.op}, g.act(), 1, features, classes, true, ShardKind::column);
  fc.saved_bytes = g.act() * static_cast<double>(features);
  const int logits = g.add(std::move(fc));
  g.add(cross_entropy(prefix + ".loss", ShardKind::vocab, {logits}, g.act(), 1, classes));
}

}  // namespace hetplan::model::detail
