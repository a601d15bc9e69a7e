#include "op_graph.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include <limits>

#include "batches.h"
#include "check/op_graph_check.h"
#include "tensor_parallel.h"
#include "torch_modules.h"

namespace hetplan::runtime::detail {
namespace {

using model::OpFn;

// Embedding tables start from N(0, 0.02^2), BERT's initialiser range.
constexpr double kEmbeddingStd = 0.02;
// Layernorm's epsilon, PyTorch's default.
constexpr double kLayerNormEps = 1e-5;

}  // namespace

OpGraph::OpGraph(const model::Model& m) : m_(&m), params_(m.ops.size()) {
  namespace nn = torch::nn;
  const bool decoder = m.family == model::Family::decoder_lm;
  std::vector<torch::Tensor> redrawn;  // a decoder's embedding tables, in op order
  for (std::size_t i = 0; i < m.ops.size(); ++i) {
    const model::Op& op = m.ops[i];
    const model::OpCompute& c = op.compute;
    const std::string name = "op" + std::to_string(i);
    if (c.fn == OpFn::conv2d) {
      auto conv = register_module(
          name,
          nn::Conv2d(nn::Conv2dOptions(conv_in_channels(op), op.gemm.n, {c.kernel_h, c.kernel_w})
                         .bias(c.bias)));
      params_[i].push_back(conv->weight);
      if (c.bias) params_[i].push_back(conv->bias);
    } else if (c.fn == OpFn::linear && op.tied_params != 0) {
      params_[i].push_back(params_[static_cast<std::size_t>(tied_table(m, op))][0]);
      if (c.bias)
        params_[i].push_back(register_parameter(name + "_bias", torch::zeros({op.gemm.n})));
    } else if (c.fn == OpFn::linear) {
      auto fc =
          register_module(name, nn::Linear(nn::LinearOptions(op.gemm.k, op.gemm.n).bias(c.bias)));
      params_[i].push_back(fc->weight);
      if (c.bias) params_[i].push_back(fc->bias);
    } else if (c.fn == OpFn::batchnorm || c.fn == OpFn::layernorm) {
      params_[i].push_back(register_parameter(name + "_weight", torch::ones({op.params / 2})));
      params_[i].push_back(register_parameter(name + "_bias", torch::zeros({op.params / 2})));
    } else if (c.fn == OpFn::embedding || c.fn == OpFn::learned_positions) {
      // A decoder's tables start as the decoder module's: drawn N(0, 1) in op order (as
      // nn::Embedding does), then redrawn N(0, 0.02^2) after every other weight (below).
      const std::int64_t width = c.shape[1];
      const double scale = decoder ? 1.0 : kEmbeddingStd;
      params_[i].push_back(
          register_parameter(name + "_table", scale * torch::randn({op.params / width, width})));
      if (decoder) redrawn.push_back(params_[i][0]);
    } else if (c.fn == OpFn::class_token) {
      const std::int64_t tokens = c.shape[0], width = c.shape[1];
      params_[i].push_back(
          register_parameter(name + "_positions", kEmbeddingStd * torch::randn({tokens, width})));
      params_[i].push_back(
          register_parameter(name + "_class", kEmbeddingStd * torch::randn({1, width})));
    } else if (c.fn == OpFn::positions) {
      const std::int64_t tokens = c.shape[0], width = c.shape[1];
      params_[i].push_back(
          register_parameter(name + "_positions", kEmbeddingStd * torch::randn({tokens, width})));
      params_[i].push_back(register_parameter(
          name + "_types", kEmbeddingStd * torch::randn({op.params / width - tokens, width})));
    }
  }
  torch::NoGradGuard no_grad;
  for (auto& t : redrawn) t.normal_(0.0, kEmbeddingStd);
}

torch::Tensor OpGraph::apply(int i, const std::vector<torch::Tensor>& in,
                             const torch::Tensor& targets, Collectives* batch_group,
                             const torch::Tensor& mask, bool batch_counts) const {
  const model::Op& op = m_->ops[static_cast<std::size_t>(i)];
  const model::OpCompute& c = op.compute;
  const auto& w = params_[static_cast<std::size_t>(i)];
  const torch::Tensor& x = in.front();
  const torch::Tensor bias = c.bias ? w[1] : torch::Tensor();
  switch (c.fn) {
    case OpFn::conv2d:
      return torch::conv2d(x, w[0], bias, {c.stride, c.stride}, {c.pad_h, c.pad_w});
    case OpFn::batchnorm:
      return batch_norm_over_group(x, w[0], w[1], batch_group, kBatchNormEps, batch_counts);
    case OpFn::relu:
      return torch::relu(x);
    case OpFn::add:
      return in[0] + in[1];
    case OpFn::concat:
      return torch::cat(in, 1);
    case OpFn::max_pool:
      return torch::max_pool2d(x, {c.kernel_h, c.kernel_w}, {c.stride, c.stride},
                               {c.pad_h, c.pad_w});
    case OpFn::avg_pool:
      return torch::avg_pool2d(x, {c.kernel_h, c.kernel_w}, {c.stride, c.stride},
                               {c.pad_h, c.pad_w});
    case OpFn::adaptive_avg_pool:
      // Global pooling as a mean (what the ResNet module computes), else PyTorch's bins.
      if (c.shape[1] == 1 && c.shape[2] == 1) return x.mean({2, 3}, true);
      return torch::adaptive_avg_pool2d(x, {c.shape[1], c.shape[2]});
    case OpFn::linear:
      return torch::linear(linear_input(i, x), w[0], bias).view(output_shape(i, x.size(0)));
    case OpFn::dropout:
      return mask.defined() ? x * mask.view(x.sizes()) : x;
    case OpFn::cross_entropy: {
      // Logits [n, C] against a class per sample (the last column of a 2-D target: BERT's
      // next-sentence label), or [n, t, C] against a label per token (-100: none).
      const std::int64_t C = x.size(-1);
      const torch::Tensor t = loss_targets(x, targets);
      // A sample's loss over its tokens is their mean (as the decoder module's). In fp32
      // whatever the logits' dtype (mixed precision's are bf16), as autocast computes a loss.
      return torch::nn::functional::cross_entropy(x.reshape({-1, C}).to(torch::kFloat), t,
                                                  torch::nn::functional::CrossEntropyFuncOptions()
                                                      .reduction(torch::kSum)
                                                      .ignore_index(kIgnoredLabel)) /
             static_cast<double>(x.dim() == 3 ? x.size(1) : 1);
    }
    case OpFn::embedding:
      return torch::embedding(w[0], x);
    case OpFn::positions: {
      // Token type 0 for the first half of the sequence (sentence A), 1 for the rest.
      const std::int64_t s = c.shape[0];
      const torch::Tensor types =
          (torch::arange(s, torch::TensorOptions().dtype(torch::kLong).device(x.device())) >= s / 2)
              .to(torch::kLong)
              .clamp_max(w[1].size(0) - 1);
      return x + w[0] + w[1].index_select(0, types);
    }
    case OpFn::learned_positions:
      return x + w[0].slice(0, 0, c.shape[0]);
    case OpFn::class_token: {
      const torch::Tensor patches = x.flatten(2).transpose(1, 2);  // [n, p * q, h]
      return torch::cat({w[1].expand({x.size(0), 1, w[1].size(1)}), patches}, 1) + w[0];
    }
    case OpFn::layernorm:
      return torch::layer_norm(x, {x.size(-1)}, w[0], w[1], kLayerNormEps);
    case OpFn::gelu:
      return torch::gelu(x);
    case OpFn::tanh:
      return torch::tanh(x);
    case OpFn::softmax:
      return torch::softmax(x, -1);
    case OpFn::attention_scores: {
      // (Its heads from the input: a rank of a split group holds its share of them.)
      const std::int64_t n = x.size(0), s = op.gemm.m, d = op.gemm.k, heads = x.size(-1) / (3 * d);
      const torch::Tensor qkv = x.view({n, s, 3, heads, d});
      const torch::Tensor q = qkv.select(2, 0).transpose(1, 2),
                          k = qkv.select(2, 1).transpose(1, 2);
      const torch::Tensor scores =
          q.matmul(k.transpose(-2, -1)) / std::sqrt(static_cast<double>(d));
      if (!c.causal) return scores;
      const torch::Tensor later =
          torch::ones({s, s}, torch::TensorOptions().dtype(torch::kBool).device(x.device()))
              .triu(1);
      return scores.masked_fill(later, -std::numeric_limits<float>::infinity());
    }
    case OpFn::attention_context: {
      const std::int64_t n = x.size(0), heads = x.size(1), s = x.size(2), d = op.gemm.n;
      const torch::Tensor v = in[1].view({n, s, 3, heads, d}).select(2, 2).transpose(1, 2);
      return x.matmul(v).transpose(1, 2).reshape({n, s, heads * d});
    }
    case OpFn::none:
      break;
  }
  throw std::logic_error("OpGraph::apply: an op that does not say what it computes");
}

torch::Tensor dropout_mask(const model::Op& op, std::uint64_t seed, int step, int index,
                           std::int64_t samples) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed * 1000003ULL +
                                                      static_cast<std::uint64_t>(step) * 7919ULL +
                                                      static_cast<std::uint64_t>(index));
  std::vector<std::int64_t> shape{samples};
  for (auto d : op.compute.shape) shape.push_back(d);
  const torch::Tensor u = torch::rand(shape, gen);
  return (u >= op.compute.drop).to(torch::kFloat) / (1.0 - op.compute.drop);
}

torch::Tensor loss_targets(const torch::Tensor& logits, const torch::Tensor& targets) {
  const torch::Tensor t = logits.dim() == 3    ? targets.slice(1, 0, logits.size(1))
                          : targets.dim() == 2 ? targets.select(1, targets.size(1) - 1)
                                               : targets;
  return t.reshape({-1});
}

torch::Tensor OpGraph::linear_input(int i, const torch::Tensor& x) const {
  const model::Op& op = m_->ops[static_cast<std::size_t>(i)];
  const std::int64_t n = x.size(0), t = linear_rows_per_sample(op.compute);
  if (t == 1 && x.dim() == 3 && x.size(2) == op.gemm.k && x.size(1) * x.size(2) != op.gemm.k)
    return x.select(1, 0);  // the first token
  return x.reshape({n * t, op.gemm.k});
}

void OpGraph::release_ops_except(const std::vector<bool>& held) { release_unheld(params_, held); }

std::vector<std::int64_t> OpGraph::output_shape(int i, std::int64_t n) const {
  std::vector<std::int64_t> shape{n};
  for (auto d : m_->ops[static_cast<std::size_t>(i)].compute.shape) shape.push_back(d);
  return shape;
}

}  // namespace hetplan::runtime::detail
