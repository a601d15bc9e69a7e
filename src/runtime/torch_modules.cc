#include "torch_modules.h"

#include <fmt/format.h>

#include <cmath>

namespace hetplan::runtime::detail {
namespace {

namespace nn = torch::nn;

const model::Op* find_op(const model::Model& m, std::string_view name) {
  for (const auto& op : m.ops)
    if (op.name == name) return &op;
  return nullptr;
}

class Mlp : public TrainModule {
 public:
  Mlp(std::int64_t in, std::int64_t hidden, int layers, std::int64_t out) {
    std::int64_t width = in;
    for (int i = 0; i < layers; ++i) {
      layers_.push_back(register_module("fc" + std::to_string(i), nn::Linear(width, hidden)));
      width = hidden;
    }
    head_ = register_module("head", nn::Linear(width, out));
  }
  torch::Tensor loss_sum(const Batch& b) override {
    torch::Tensor x = b.inputs;
    for (auto& l : layers_) x = torch::relu(l->forward(x));
    return torch::nn::functional::cross_entropy(
        head_->forward(x), b.targets,
        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
  }

 private:
  std::vector<nn::Linear> layers_;
  nn::Linear head_{nullptr};
};

class Block : public nn::Module {
 public:
  Block(std::int64_t hidden, int heads, std::int64_t ffn)
      : heads_(heads),
        ln1_(register_module("ln1", nn::LayerNorm(nn::LayerNormOptions({hidden})))),
        qkv_(register_module("qkv", nn::Linear(hidden, 3 * hidden))),
        proj_(register_module("proj", nn::Linear(hidden, hidden))),
        ln2_(register_module("ln2", nn::LayerNorm(nn::LayerNormOptions({hidden})))),
        fc1_(register_module("fc1", nn::Linear(hidden, ffn))),
        fc2_(register_module("fc2", nn::Linear(ffn, hidden))) {}

  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& causal) {
    const auto n = x.size(0), s = x.size(1), h = x.size(2), d = h / heads_;
    auto qkv = qkv_->forward(ln1_->forward(x)).view({n, s, 3, heads_, d}).permute({2, 0, 3, 1, 4});
    auto q = qkv[0], k = qkv[1], v = qkv[2];  // [n, heads, s, d]
    auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(d));
    scores = scores.masked_fill(causal, -std::numeric_limits<float>::infinity());
    auto ctx = torch::matmul(torch::softmax(scores, -1), v).transpose(1, 2).reshape({n, s, h});
    auto y = x + proj_->forward(ctx);
    return y + fc2_->forward(torch::gelu(fc1_->forward(ln2_->forward(y))));
  }

 private:
  int heads_;
  nn::LayerNorm ln1_;
  nn::Linear qkv_, proj_;
  nn::LayerNorm ln2_;
  nn::Linear fc1_, fc2_;
};

class Gpt : public TrainModule {
 public:
  Gpt(std::int64_t vocab, std::int64_t positions, std::int64_t hidden, int heads, int layers,
      std::int64_t ffn, bool tied)
      : word_(register_module("word", nn::Embedding(vocab, hidden))),
        pos_(register_module("pos", nn::Embedding(positions, hidden))),
        ln_f_(register_module("ln_f", nn::LayerNorm(nn::LayerNormOptions({hidden})))) {
    for (int i = 0; i < layers; ++i)
      blocks_.push_back(register_module("block" + std::to_string(i),
                                        std::make_shared<Block>(hidden, heads, ffn)));
    if (!tied)
      head_ = register_module("head", nn::Linear(nn::LinearOptions(hidden, vocab).bias(false)));
    // GPT-2's initialisation of the embeddings (libtorch's default, N(0, 1), makes the tied
    // head's first logits far too large).
    torch::NoGradGuard no_grad;
    word_->weight.normal_(0.0, 0.02);
    pos_->weight.normal_(0.0, 0.02);
  }
  torch::Tensor loss_sum(const Batch& b) override {
    const auto s = b.inputs.size(1);
    auto x = word_->forward(b.inputs) + pos_->forward(torch::arange(s, torch::kLong));
    auto causal = torch::ones({s, s}, torch::kBool).triu(1);
    for (auto& blk : blocks_) x = blk->forward(x, causal);
    x = ln_f_->forward(x);
    auto logits = head_ ? head_->forward(x) : torch::matmul(x, word_->weight.t());
    // Each sample's loss is the mean over its tokens.
    auto tokens = torch::nn::functional::cross_entropy(
        logits.reshape({-1, logits.size(-1)}), b.targets.reshape({-1}),
        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
    return tokens / static_cast<double>(s);
  }

 private:
  nn::Embedding word_, pos_;
  nn::LayerNorm ln_f_;
  std::vector<std::shared_ptr<Block>> blocks_;
  nn::Linear head_{nullptr};
};

std::int64_t count_parameters(const torch::nn::Module& mod) {
  std::int64_t n = 0;
  for (const auto& p : mod.parameters()) n += p.numel();
  return n;
}

}  // namespace

Result<std::shared_ptr<TrainModule>> build_module(const model::Model& m) {
  std::shared_ptr<TrainModule> mod;
  if (m.family == model::Family::mlp) {
    const model::Op* first = m.ops.empty() ? nullptr : &m.ops.front();
    if (!first || first->kind != model::OpKind::matmul)
      return Error{
          fmt::format("--model: {}: expected an MLP whose first op is a linear layer", m.name)};
    mod = std::make_shared<Mlp>(first->gemm.k, m.hidden, m.num_blocks, m.num_classes);
  } else if (m.family == model::Family::decoder_lm) {
    const model::Op* pos = find_op(m, "embedding.position");
    const model::Op* head = find_op(m, "head.lm_head");
    if (!pos || !head || m.hidden <= 0 || m.heads <= 0 || m.hidden % m.heads != 0)
      return Error{fmt::format(
          "--model: {}: the runtime executes GPT-style decoders (learned positions, an LM head); "
          "this one is not executed yet",
          m.name)};
    mod = std::make_shared<Gpt>(m.vocab, pos->params / m.hidden, m.hidden, m.heads, m.num_blocks,
                                m.ffn_hidden, head->tied_params > 0);
  } else {
    return Error{fmt::format(
        "--model: {}: the runtime executes MLPs and GPT-style decoder language models; a {} model "
        "is not executed yet",
        m.name, model::to_string(m.family))};
  }
  const std::int64_t have = count_parameters(*mod), want = m.parameters();
  if (have != want)
    return Error{fmt::format(
        "--model: {}: the runtime's module would have {} parameters against the description's {}: "
        "this variant (e.g. Llama-style norms and MLP) is not executed yet",
        m.name, have, want)};
  return mod;
}

}  // namespace hetplan::runtime::detail
