#include "op_graph_check.h"

#include <fmt/format.h>

#include <string>
#include <vector>

namespace hetplan::runtime::detail {

std::int64_t conv_in_channels(const model::Op& op) {
  return op.gemm.k / (op.compute.kernel_h * op.compute.kernel_w);
}

int tied_table(const model::Model& m, const model::Op& op) {
  if (op.tied_params == 0) return -1;
  const int owner = m.tied_owner();
  return owner >= 0 && m.ops[static_cast<std::size_t>(owner)].compute.fn == model::OpFn::embedding
             ? owner
             : -1;
}

namespace {

using model::OpFn;

std::int64_t elements(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::int64_t window_out(std::int64_t in, std::int64_t k, std::int64_t stride, std::int64_t pad) {
  return (in + 2 * pad - k) / stride + 1;
}

// The per-sample shape of the batch's inputs, as op `op` (one without inputs) reads them: images
// for CNNs, feature vectors of its own width for MLPs, token ids for language models.
std::vector<std::int64_t> input_shape(const model::Model& m, const model::Op& op) {
  if (m.family == model::Family::mlp) return {op.gemm.k};
  if (reads_images(m)) return {3, m.image_size, m.image_size};
  return {m.seq_len};
}

// Why op i's compute does not fit its inputs' shapes; empty when it does.
std::string misfit(const model::Model& m, int i) {
  const model::Op& op = m.ops[static_cast<std::size_t>(i)];
  const model::OpCompute& c = op.compute;
  std::vector<std::vector<std::int64_t>> in;
  for (int p : op.inputs) in.push_back(m.ops[static_cast<std::size_t>(p)].compute.shape);
  if (op.inputs.empty()) in.push_back(input_shape(m, op));
  const auto& x = in.front();
  const bool image = x.size() == 3;
  auto same = [&] { return c.shape == x ? "" : "its shape differs from its input's"; };
  switch (c.fn) {
    case OpFn::none:
      return "it does not say what it computes";
    case OpFn::conv2d: {
      if (!image || c.shape.size() != 3) return "expected a [c, h, w] input and output";
      if (conv_in_channels(op) != x[0] || op.gemm.n != c.shape[0])
        return fmt::format("its weight [{} x {}] does not fit its input's {} channels", op.gemm.k,
                           op.gemm.n, x[0]);
      if (window_out(x[1], c.kernel_h, c.stride, c.pad_h) != c.shape[1] ||
          window_out(x[2], c.kernel_w, c.stride, c.pad_w) != c.shape[2])
        return "its window does not give its output's height and width";
      return "";
    }
    case OpFn::max_pool:
    case OpFn::avg_pool:
      if (!image || c.shape.size() != 3 || c.shape[0] != x[0] ||
          window_out(x[1], c.kernel_h, c.stride, c.pad_h) != c.shape[1] ||
          window_out(x[2], c.kernel_w, c.stride, c.pad_w) != c.shape[2])
        return "its window does not give its output's shape";
      return "";
    case OpFn::adaptive_avg_pool:
      return image && c.shape.size() == 3 && c.shape[0] == x[0] ? "" : "expected [c, h, w] shapes";
    case OpFn::batchnorm:
      if (!image || op.params != 2 * x[0]) return "expected a [c, h, w] input and 2c parameters";
      return same();
    case OpFn::relu:
    case OpFn::dropout:
      if (elements(c.shape) != elements(x)) return "its shape differs from its input's";
      return "";
    case OpFn::add:
      if (in.size() != 2 || in[0] != in[1]) return "expected two inputs of one shape";
      return same();
    case OpFn::concat: {
      std::int64_t channels = 0;
      for (const auto& s : in) {
        if (s.size() != 3 || s[1] != x[1] || s[2] != x[2])
          return "expected inputs of one height and width";
        channels += s[0];
      }
      return c.shape == std::vector<std::int64_t>{channels, x[1], x[2]}
                 ? ""
                 : "its shape is not its inputs' joined along channels";
    }
    case OpFn::linear: {
      const bool tokens = c.shape.size() == 2 && x.size() == 2 && x[0] == c.shape[0] &&
                          x[1] == op.gemm.k && op.gemm.n == c.shape[1];
      const bool flat = c.shape.size() == 1 && op.gemm.n == c.shape[0] &&
                        (op.gemm.k == elements(x) || (x.size() == 2 && x[1] == op.gemm.k));
      if (!tokens && !flat)
        return "its weight does not fit its input (flattened, its first token or each token)";
      if (op.params + op.tied_params != op.gemm.k * op.gemm.n + (c.bias ? op.gemm.n : 0))
        return "its parameters are not a weight of its input and output widths (and a bias)";
      if (op.tied_params != 0 &&
          (op.tied_params != op.gemm.k * op.gemm.n || tied_table(m, op) < 0 ||
           m.ops[static_cast<std::size_t>(tied_table(m, op))].params != op.tied_params))
        return "its tied weight is not the word embedding's table";
      return "";
    }
    case OpFn::cross_entropy:
      return x.size() == 1 || x.size() == 2 ? "" : "expected a linear layer's logits";
    case OpFn::embedding:
      if (x.size() != 1 || c.shape.size() != 2 || c.shape[0] != x[0] ||
          op.params % c.shape[1] != 0 || op.params == 0)
        return "expected token ids in and a [vocab, width] table";
      return "";
    case OpFn::positions:
      if (x.size() != 2 || op.params % x[1] != 0 || op.params / x[1] <= x[0])
        return "expected [tokens, width] in and a row per position and per token type";
      return same();
    case OpFn::learned_positions:
      if (x.size() != 2 || op.params % x[1] != 0 || op.params / x[1] < x[0])
        return "expected [tokens, width] in and at least a row per position";
      return same();
    case OpFn::class_token:
      if (!image || c.shape != std::vector<std::int64_t>{x[1] * x[2] + 1, x[0]} ||
          op.params != (c.shape[0] + 1) * x[0])
        return "expected [width, h, w] patches in, [h * w + 1, width] tokens out and a row per "
               "position and one for the class token";
      return "";
    case OpFn::layernorm:
      if (op.params != 2 * x.back()) return "expected a scale and a shift per feature";
      return same();
    case OpFn::gelu:
    case OpFn::tanh:
    case OpFn::softmax:
      return same();
    case OpFn::attention_scores: {
      const auto& gm = op.gemm;
      if (x.size() != 2 || x[0] != gm.m || x[1] != 3 * gm.batch_count * gm.k || gm.m != gm.n ||
          c.shape != std::vector<std::int64_t>{gm.batch_count, gm.m, gm.n})
        return "expected a [s, 3 * heads * d] QKV input and [heads, s, s] scores";
      return "";
    }
    case OpFn::attention_context: {
      if (in.size() != 2 || x.size() != 3 || in[1].size() != 2 || in[1][0] != x[1] ||
          in[1][1] != 3 * x[0] * op.gemm.n ||
          c.shape != std::vector<std::int64_t>{x[1], x[0] * op.gemm.n})
        return "expected [heads, s, s] probabilities and a [s, 3 * heads * d] QKV input";
      return "";
    }
  }
  return "";
}

}  // namespace

Result<bool> check_op_graph(const model::Model& m) {
  for (std::size_t i = 0; i < m.ops.size(); ++i) {
    const model::Op& op = m.ops[i];
    if (op.compute.fn != OpFn::none && op.compute.shape.empty())
      return Error{fmt::format("--model: {}: op \"{}\" has no output shape", m.name, op.name)};
    if (op.compute.fn != OpFn::none && op.inputs.empty() && reads_images(m) && m.image_size < 1)
      return Error{
          fmt::format("--model: {}: op \"{}\" reads images, but the model has no "
                      "image_size",
                      m.name, op.name)};
    for (int p : op.inputs)
      if (m.ops[static_cast<std::size_t>(p)].compute.shape.empty())
        return Error{fmt::format(
            "--model: {}: op \"{}\" does not say what it computes (the runtime executes op-level "
            "plans of models whose every op does: the zoo's mlp, resnet, vgg, inception, bert, "
            "gpt and vit)",
            m.name, m.ops[static_cast<std::size_t>(p)].name)};
    if (const std::string why = misfit(m, static_cast<int>(i)); !why.empty())
      return Error{fmt::format(
          "--model: {}: op \"{}\" cannot be executed op by op: {} (the runtime executes op-level "
          "plans of models whose every op says what it computes: the zoo's mlp, resnet, vgg, "
          "inception, bert, gpt and vit)",
          m.name, op.name, why)};
  }
  return true;
}

Result<bool> check_layer_chain(const model::Model& m) {
  if (auto ok = check_op_graph(m); !ok) return ok.error();
  if (m.layers.empty() || m.ops.empty() || m.ops.back().compute.fn != OpFn::cross_entropy)
    return Error{fmt::format("--model: {}: expected the last op to be the loss", m.name)};
  for (std::size_t l = 0; l < m.layers.size(); ++l) {
    const model::Layer& layer = m.layers[l];
    const int before = l == 0 ? -1 : m.layers[l - 1].first_op + m.layers[l - 1].num_ops - 1;
    for (int o = layer.first_op; o < layer.first_op + layer.num_ops; ++o) {
      const model::Op& op = m.ops[static_cast<std::size_t>(o)];
      if (op.inputs.empty() && l > 0)
        return Error{
            fmt::format("--model: {}: op \"{}\" reads the batch's inputs outside the first layer",
                        m.name, op.name)};
      for (int in : op.inputs)
        if (in < layer.first_op && in != before)
          return Error{fmt::format(
              "--model: {}: op \"{}\" of layer \"{}\" reads op \"{}\", neither of its layer nor "
              "the last of the layer before (a stage passes the next one tensor)",
              m.name, op.name, layer.name, m.ops[static_cast<std::size_t>(in)].name)};
    }
  }
  return true;
}

}  // namespace hetplan::runtime::detail
