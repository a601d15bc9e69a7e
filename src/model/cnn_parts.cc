#include "cnn_parts.h"

namespace hetplan::model::detail {
namespace {

std::vector<int> inputs_of(const Feature& in) {
  return in.op < 0 ? std::vector<int>{} : std::vector<int>{in.op};
}

std::int64_t out_size(std::int64_t in, std::int64_t k, std::int64_t stride, std::int64_t pad) {
  return (in + 2 * pad - k) / stride + 1;
}

OpCompute computes(OpFn fn, const Feature& out) {
  OpCompute c;
  c.fn = fn;
  c.shape = {out.c, out.h, out.w};
  return c;
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
  op.compute = computes(OpFn::conv2d, out);
  op.compute.kernel_h = c.kh;
  op.compute.kernel_w = c.kw;
  op.compute.stride = c.stride;
  op.compute.pad_h = c.pad_h;
  op.compute.pad_w = c.pad_w;
  op.compute.bias = c.bias;
  out.op = g.add(std::move(op));
  return out;
}

Feature add_batchnorm(GraphBuilder& g, const std::string& name, const Feature& in) {
  Op op = pointwise(name, OpKind::batchnorm, ShardKind::replicated, {in.op}, g.act(), in.elements(),
                    kBatchNormFlops);
  op.params = 2 * in.c;
  op.saved_bytes = g.act() * in.elements();
  op.compute = computes(OpFn::batchnorm, in);
  Feature out = in;
  out.op = g.add(std::move(op));
  return out;
}

Feature add_relu(GraphBuilder& g, const std::string& name, const Feature& in) {
  Op op = pointwise(name, OpKind::elementwise, ShardKind::replicated, {in.op}, g.act(),
                    in.elements(), kReluFlops);
  op.saved_bytes = g.act() * in.elements();
  op.compute = computes(OpFn::relu, in);
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
  op.compute = computes(max ? OpFn::max_pool : OpFn::avg_pool, out);
  op.compute.kernel_h = op.compute.kernel_w = k;
  op.compute.stride = stride;
  op.compute.pad_h = op.compute.pad_w = pad;
  out.op = g.add(std::move(op));
  return out;
}

Feature add_adaptive_avgpool(GraphBuilder& g, const std::string& name, const Feature& in,
                             std::int64_t out_h, std::int64_t out_w) {
  Feature out{-1, in.c, out_h, out_w};
  Op op = pointwise(name, OpKind::pool, ShardKind::replicated, {in.op}, g.act(), out.elements(), 0);
  op.flops = in.elements();  // every input element is added once
  op.bytes_read = g.act() * in.elements();
  op.compute = computes(OpFn::adaptive_avg_pool, out);
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
  Op op = pointwise(name, OpKind::elementwise, ShardKind::replicated, std::move(inputs), g.act(),
                    out.elements(), 0);
  op.compute = computes(OpFn::concat, out);
  out.op = g.add(std::move(op));
  return out;
}

Feature add_sum(GraphBuilder& g, const std::string& name, const Feature& a, const Feature& b) {
  Feature out = a;
  Op op = pointwise(name, OpKind::elementwise, ShardKind::replicated, {a.op, b.op}, g.act(),
                    a.elements(), kAddFlops, 2);
  op.compute = computes(OpFn::add, out);
  out.op = g.add(std::move(op));
  return out;
}

OpCompute linear_compute(std::int64_t out) {
  OpCompute c;
  c.fn = OpFn::linear;
  c.shape = {out};
  c.bias = true;
  return c;
}

OpCompute dropout_compute(std::int64_t features, double drop) {
  OpCompute c;
  c.fn = OpFn::dropout;
  c.shape = {features};
  c.drop = drop;
  return c;
}

void add_classifier(GraphBuilder& g, const std::string& prefix, const Feature& in,
                    std::int64_t classes) {
  const std::int64_t features = in.c * in.h * in.w;
  Op fc = linear(prefix + ".fc", {in.op}, g.act(), 1, features, classes, true, ShardKind::column);
  fc.saved_bytes = g.act() * static_cast<double>(features);
  fc.compute = linear_compute(classes);
  const int logits = g.add(std::move(fc));
  Op loss = cross_entropy(prefix + ".loss", ShardKind::vocab, {logits}, g.act(), 1, classes);
  loss.compute.fn = OpFn::cross_entropy;
  loss.compute.shape = {1};
  g.add(std::move(loss));
}

}  // namespace hetplan::model::detail
