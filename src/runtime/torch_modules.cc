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

std::vector<torch::Tensor> params_of(std::initializer_list<const nn::Module*> mods) {
  std::vector<torch::Tensor> out;
  for (const auto* m : mods)
    for (const auto& t : m->parameters()) out.push_back(t);
  return out;
}

torch::Tensor summed_cross_entropy(const torch::Tensor& logits, const torch::Tensor& targets) {
  return torch::nn::functional::cross_entropy(
      logits, targets, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
}

// Activation recomputation: `f` runs without keeping its intermediate activations, only its
// input, and runs again in the backward pass (the reentrant form of activation checkpointing).
// `f` must outlive the backward pass; the module members that hold the functions do.
class Recomputed : public torch::autograd::Function<Recomputed> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x,
                               const LayerFn* f) {
    ctx->save_for_backward({x});
    ctx->saved_data["f"] = reinterpret_cast<std::int64_t>(f);
    return (*f)(x);  // autograd is off here: nothing inside f is kept
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    auto x = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    const auto* f = reinterpret_cast<const LayerFn*>(ctx->saved_data["f"].toInt());
    torch::Tensor y;
    {
      torch::AutoGradMode on(true);
      y = (*f)(x);
    }
    torch::autograd::backward({y}, {grad[0]});  // parameters' gradients accumulate here
    return {x.grad(), torch::Tensor()};
  }
};

// f(x), recomputed in the backward pass when `recompute`. An input that needs no gradient (the
// first layer's features) is made a leaf that does, so that the backward pass reaches f's
// parameters.
torch::Tensor run_layer(const LayerFn& f, const torch::Tensor& x, bool recompute) {
  if (!recompute) return f(x);
  return Recomputed::apply(x.requires_grad() ? x : x.detach().requires_grad_(true), &f);
}

// Layers "layers.i" (Linear + ReLU) and "head" (Linear + cross-entropy).
class Mlp : public TrainModule {
 public:
  Mlp(std::int64_t in, std::int64_t hidden, int layers, std::int64_t out) : hidden_(hidden) {
    std::int64_t width = in;
    for (int i = 0; i < layers; ++i) {
      layers_.push_back(register_module("fc" + std::to_string(i), nn::Linear(width, hidden)));
      width = hidden;
    }
    head_ = register_module("head", nn::Linear(width, out));
    num_layers_ = layers + 1;
    for (int i = 0; i < layers; ++i)
      layer_fns_.push_back(
          [this, i](const torch::Tensor& x) { return torch::relu(layers_[i]->forward(x)); });
  }
  torch::Tensor forward_layers(int first, int count, const torch::Tensor& x,
                               const torch::Tensor& targets) override {
    torch::Tensor y = x;
    for (int l = first; l < first + count; ++l) {
      if (l + 1 < num_layers_) {
        // Selective recomputation drops attention cores only: an MLP has none.
        y = run_layer(layer_fns_[l], y, recompute_ == cost::Recompute::full);
      } else {
        y = summed_cross_entropy(head_->forward(y), targets);
      }
    }
    return y;
  }
  std::vector<std::int64_t> activation_shape(std::int64_t n) const override { return {n, hidden_}; }
  std::vector<torch::Tensor> layer_parameters(int first, int count) override {
    std::vector<torch::Tensor> out;
    for (int l = first; l < first + count; ++l) {
      const nn::Module* m =
          l + 1 < num_layers_ ? static_cast<const nn::Module*>(layers_[l].get()) : head_.get();
      for (const auto& t : params_of({m})) out.push_back(t);
    }
    return out;
  }

 private:
  std::int64_t hidden_;
  std::vector<nn::Linear> layers_;
  std::vector<LayerFn> layer_fns_;
  nn::Linear head_{nullptr};
};

class Block : public nn::Module {
 public:
  Block(std::int64_t hidden, int heads, std::int64_t ffn, const torch::Tensor* causal)
      : heads_(heads),
        causal_(causal),
        ln1_(register_module("ln1", nn::LayerNorm(nn::LayerNormOptions({hidden})))),
        qkv_(register_module("qkv", nn::Linear(hidden, 3 * hidden))),
        proj_(register_module("proj", nn::Linear(hidden, hidden))),
        ln2_(register_module("ln2", nn::LayerNorm(nn::LayerNormOptions({hidden})))),
        fc1_(register_module("fc1", nn::Linear(hidden, ffn))),
        fc2_(register_module("fc2", nn::Linear(ffn, hidden))) {
    whole_ = [this](const torch::Tensor& x) { return body(x, false); };
    core_ = [this](const torch::Tensor& qkv) { return attention_core(qkv); };
  }

  torch::Tensor forward(const torch::Tensor& x, cost::Recompute recompute) {
    if (recompute == cost::Recompute::full) return run_layer(whole_, x, true);
    return body(x, recompute == cost::Recompute::selective);
  }

 private:
  torch::Tensor body(const torch::Tensor& x, bool recompute_core) {
    auto ctx = run_layer(core_, qkv_->forward(ln1_->forward(x)), recompute_core);
    auto y = x + proj_->forward(ctx);
    return y + fc2_->forward(torch::gelu(fc1_->forward(ln2_->forward(y))));
  }
  // QK^T, softmax and scores x V of every head: what selective recomputation drops.
  torch::Tensor attention_core(const torch::Tensor& qkv_out) const {
    const auto n = qkv_out.size(0), s = qkv_out.size(1), h = qkv_out.size(2) / 3, d = h / heads_;
    auto qkv = qkv_out.view({n, s, 3, heads_, d}).permute({2, 0, 3, 1, 4});
    auto q = qkv[0], k = qkv[1], v = qkv[2];  // [n, heads, s, d]
    auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(d));
    scores = scores.masked_fill(*causal_, -std::numeric_limits<float>::infinity());
    return torch::matmul(torch::softmax(scores, -1), v).transpose(1, 2).reshape({n, s, h});
  }

  int heads_;
  const torch::Tensor* causal_;  // the model's causal mask
  nn::LayerNorm ln1_;
  nn::Linear qkv_, proj_;
  nn::LayerNorm ln2_;
  nn::Linear fc1_, fc2_;
  LayerFn whole_, core_;
};

// Layers "embedding" (words + positions), "layers.i" (blocks) and "head" (final norm, LM head,
// cross-entropy).
class Gpt : public TrainModule {
 public:
  Gpt(std::int64_t vocab, std::int64_t positions, std::int64_t hidden, int heads, int layers,
      std::int64_t ffn, bool tied, std::int64_t seq)
      : word_(register_module("word", nn::Embedding(vocab, hidden))),
        pos_(register_module("pos", nn::Embedding(positions, hidden))),
        ln_f_(register_module("ln_f", nn::LayerNorm(nn::LayerNormOptions({hidden})))),
        hidden_(hidden),
        seq_(seq) {
    for (int i = 0; i < layers; ++i)
      blocks_.push_back(register_module("block" + std::to_string(i),
                                        std::make_shared<Block>(hidden, heads, ffn, &causal_)));
    causal_ = torch::ones({seq, seq}, torch::kBool).triu(1);
    if (!tied)
      head_ = register_module("head", nn::Linear(nn::LinearOptions(hidden, vocab).bias(false)));
    // GPT-2's initialisation of the embeddings (libtorch's default, N(0, 1), makes the tied
    // head's first logits far too large).
    torch::NoGradGuard no_grad;
    word_->weight.normal_(0.0, 0.02);
    pos_->weight.normal_(0.0, 0.02);
    num_layers_ = layers + 2;
  }
  torch::Tensor forward_layers(int first, int count, const torch::Tensor& x,
                               const torch::Tensor& targets) override {
    torch::Tensor y = x;
    const auto s = seq_;
    for (int l = first; l < first + count; ++l) {
      if (l == 0) {
        y = word_->forward(y) + pos_->forward(torch::arange(s, torch::kLong));
      } else if (l + 1 < num_layers_) {
        y = blocks_[l - 1]->forward(y, recompute_);
      } else {
        y = ln_f_->forward(y);
        const torch::Tensor& w = head_                  ? head_->weight
                                 : head_copy_.defined() ? head_copy_
                                                        : word_->weight;
        auto logits = torch::matmul(y, w.t());
        // Each sample's loss is the mean over its tokens.
        y = summed_cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1})) /
            static_cast<double>(s);
      }
    }
    return y;
  }
  std::vector<std::int64_t> activation_shape(std::int64_t n) const override {
    return {n, seq_, hidden_};
  }
  std::vector<torch::Tensor> layer_parameters(int first, int count) override {
    std::vector<torch::Tensor> out;
    auto add = [&](std::vector<torch::Tensor> v) { out.insert(out.end(), v.begin(), v.end()); };
    for (int l = first; l < first + count; ++l) {
      if (l == 0) {
        add(params_of({word_.get(), pos_.get()}));
      } else if (l + 1 < num_layers_) {
        add(params_of({blocks_[l - 1].get()}));
      } else {
        add(params_of({ln_f_.get()}));
        if (head_) add(params_of({head_.get()}));
        if (head_copy_.defined()) out.push_back(head_copy_);
      }
    }
    return out;
  }
  std::pair<torch::Tensor, torch::Tensor> untie_head() override {
    if (head_) return {};
    if (!head_copy_.defined()) head_copy_ = word_->weight.detach().clone().requires_grad_(true);
    return {word_->weight, head_copy_};
  }

 private:
  nn::Embedding word_, pos_;
  nn::LayerNorm ln_f_;
  std::vector<std::shared_ptr<Block>> blocks_;
  nn::Linear head_{nullptr};
  torch::Tensor head_copy_;  // the tied head's own copy when a pipeline splits it off
  torch::Tensor causal_;
  std::int64_t hidden_, seq_;
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
                                m.ffn_hidden, head->tied_params > 0, m.seq_len);
  } else {
    return Error{fmt::format(
        "--model: {}: the runtime executes MLPs and GPT-style decoder language models; a {} model "
        "is not executed yet",
        m.name, model::to_string(m.family))};
  }
  if (mod->num_layers() != static_cast<int>(m.layers.size()))
    return Error{
        fmt::format("--model: {}: the runtime's module has {} layers against the "
                    "description's {}: this variant is not executed yet",
                    m.name, mod->num_layers(), m.layers.size())};
  const std::int64_t have = count_parameters(*mod), want = m.parameters();
  if (have != want)
    return Error{fmt::format(
        "--model: {}: the runtime's module would have {} parameters against the description's {}: "
        "this variant (e.g. Llama-style norms and MLP) is not executed yet",
        m.name, have, want)};
  return mod;
}

}  // namespace hetplan::runtime::detail
