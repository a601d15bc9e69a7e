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

// Slices of a weight (or bias) along `dim`, concatenated, in place of the whole.
void keep_slices(torch::Tensor& t, int dim,
                 const std::vector<std::pair<std::int64_t, std::int64_t>>& ranges) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> parts;
  for (auto [b, e] : ranges) parts.push_back(t.slice(dim, b, e));
  t.set_data(torch::cat(parts, dim).clone());
}

class Block : public nn::Module {
 public:
  Block(std::int64_t hidden, int heads, std::int64_t ffn, const torch::Tensor* causal,
        const TensorParallel* tp)
      : hidden_(hidden),
        heads_(heads),
        ffn_(ffn),
        causal_(causal),
        tp_(tp),
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

  // Megatron-LM's split: QKV by heads and fc1 by columns (column-parallel), proj and fc2 by the
  // matching input features (row-parallel, partial sums all-reduced); norms and the row-parallel
  // biases stay whole.
  Result<bool> shard() {
    auto heads = unit_range(heads_, *tp_, "attention heads");
    if (!heads) return heads.error();
    auto cols = unit_range(ffn_, *tp_, "MLP columns");
    if (!cols) return cols.error();
    const std::int64_t d = hidden_ / heads_, h0 = heads->first * d, h1 = heads->second * d;
    const std::vector<std::pair<std::int64_t, std::int64_t>> qkv_rows = {
        {h0, h1}, {hidden_ + h0, hidden_ + h1}, {2 * hidden_ + h0, 2 * hidden_ + h1}};
    keep_slices(qkv_->weight, 0, qkv_rows);
    keep_slices(qkv_->bias, 0, qkv_rows);
    keep_slices(proj_->weight, 1, {{h0, h1}});
    keep_slices(fc1_->weight, 0, {*cols});
    keep_slices(fc1_->bias, 0, {*cols});
    keep_slices(fc2_->weight, 1, {*cols});
    local_heads_ = heads->second - heads->first;
    return true;
  }

 private:
  torch::Tensor body(const torch::Tensor& x, bool recompute_core) {
    namespace F = torch::nn::functional;
    const auto a = copy_to_group(ln1_->forward(x), *tp_);
    const auto ctx = run_layer(core_, F::linear(a, qkv_->weight, qkv_->bias), recompute_core);
    const auto y = x + reduce_from_group(torch::matmul(ctx, proj_->weight.t()), *tp_) + proj_->bias;
    const auto b = copy_to_group(ln2_->forward(y), *tp_);
    const auto m = torch::gelu(F::linear(b, fc1_->weight, fc1_->bias));
    return y + reduce_from_group(torch::matmul(m, fc2_->weight.t()), *tp_) + fc2_->bias;
  }
  // QK^T, softmax and scores x V of this rank's heads: what selective recomputation drops.
  torch::Tensor attention_core(const torch::Tensor& qkv_out) const {
    const auto n = qkv_out.size(0), s = qkv_out.size(1), w = qkv_out.size(2) / 3;
    const auto heads = local_heads_ > 0 ? local_heads_ : heads_, d = w / heads;
    auto qkv = qkv_out.view({n, s, 3, heads, d}).permute({2, 0, 3, 1, 4});
    auto q = qkv[0], k = qkv[1], v = qkv[2];  // [n, heads, s, d]
    auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(d));
    scores = scores.masked_fill(*causal_, -std::numeric_limits<float>::infinity());
    return torch::matmul(torch::softmax(scores, -1), v).transpose(1, 2).reshape({n, s, w});
  }

  std::int64_t hidden_, heads_, ffn_;
  std::int64_t local_heads_ = 0;  // after shard()
  const torch::Tensor* causal_;   // the model's causal mask
  const TensorParallel* tp_;      // the model's tensor-parallel group
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
      blocks_.push_back(
          register_module("block" + std::to_string(i),
                          std::make_shared<Block>(hidden, heads, ffn, &causal_, &tp_)));
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
        y = embed(y) + pos_->forward(torch::arange(s, torch::kLong));
      } else if (l + 1 < num_layers_) {
        y = blocks_[l - 1]->forward(y, recompute_);
      } else {
        y = ln_f_->forward(y);
        const torch::Tensor& w = head_                  ? head_->weight
                                 : head_copy_.defined() ? head_copy_
                                                        : word_->weight;
        auto logits = torch::matmul(copy_to_group(y, tp_), w.t());
        logits = logits.reshape({-1, logits.size(-1)});
        // Each sample's loss is the mean over its tokens.
        y = (tp_.active() ? vocab_parallel_cross_entropy(logits, targets.reshape({-1}))
                          : summed_cross_entropy(logits, targets.reshape({-1}))) /
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
  Result<bool> shard(const TensorParallel& tp) override {
    tp_ = tp;
    if (!tp_.active()) return true;
    for (auto& b : blocks_)
      if (auto ok = b->shard(); !ok) return ok;
    // The word embedding and the LM head by vocabulary rows (Megatron-LM's vocab-parallel
    // embedding and head); positions stay whole.
    auto rows = unit_range(word_->weight.size(0), tp_, "vocabulary rows");
    if (!rows) return rows.error();
    vocab_ = *rows;
    keep_slices(word_->weight, 0, {vocab_});
    if (head_) keep_slices(head_->weight, 0, {vocab_});
    return true;
  }
  bool tied_head() const override { return !head_; }
  std::pair<torch::Tensor, torch::Tensor> untie_head() override {
    if (head_) return {};
    if (!head_copy_.defined()) head_copy_ = word_->weight.detach().clone().requires_grad_(true);
    return {word_->weight, head_copy_};
  }

 private:
  // Token embeddings; split by vocabulary rows, each rank looks up its own rows and the group sums.
  torch::Tensor embed(const torch::Tensor& ids) {
    if (!tp_.active()) return word_->forward(ids);
    const auto [v0, v1] = vocab_;
    const auto mine = (ids >= v0) & (ids < v1);
    const auto local = (ids - v0).clamp(0, v1 - v0 - 1);
    const auto e = torch::embedding(word_->weight, local) * mine.unsqueeze(-1);
    return reduce_from_group(e, tp_);
  }
  // Summed cross-entropy over rows of logits split by vocabulary: the group's maximum, the sum of
  // exponentials and the target's logit are summed over the ranks (Megatron-LM).
  torch::Tensor vocab_parallel_cross_entropy(const torch::Tensor& logits,
                                             const torch::Tensor& targets) {
    const auto [v0, v1] = vocab_;
    const auto top = max_over_group(std::get<0>(logits.detach().max(1)), tp_);
    const auto sum_exp = reduce_from_group((logits - top.unsqueeze(1)).exp().sum(1), tp_);
    const auto mine = (targets >= v0) & (targets < v1);
    const auto local = (targets - v0).clamp(0, v1 - v0 - 1);
    const auto target_logit =
        reduce_from_group(logits.gather(1, local.unsqueeze(1)).squeeze(1) * mine, tp_);
    return (sum_exp.log() + top - target_logit).sum();
  }

  TensorParallel tp_;
  std::pair<std::int64_t, std::int64_t> vocab_{0, 0};
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
