#include "torch_modules.h"

#include <fmt/format.h>
#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "autocast_scope.h"
#include "check/op_graph_check.h"
#include "op_graph_module.h"
#include "resnet_module.h"

namespace hetplan::runtime::detail {
namespace {

namespace nn = torch::nn;

// Whether this libtorch fuses the attention core (scaled_dot_product_attention, 2.0 and later).
constexpr bool kFusedAttentionKernel = TORCH_VERSION_MAJOR >= 2;

const model::Op* find_op(const model::Model& m, std::string_view name) {
  for (const auto& op : m.ops)
    if (op.name == name) return &op;
  return nullptr;
}

const model::Op* find_suffix(const model::Model& m, std::string_view suffix) {
  for (const auto& op : m.ops)
    if (op.name.size() >= suffix.size() &&
        op.name.compare(op.name.size() - suffix.size(), suffix.size(), suffix) == 0)
      return &op;
  return nullptr;
}

// Moves a tensor the module keeps outside its registered parameters (an untied head's copy) to
// `device` in place, so that every handle to it follows; an undefined one stays so.
void move_tensor(torch::Tensor& t, const torch::Device& device) {
  if (!t.defined()) return;
  torch::NoGradGuard no_grad;
  t.set_data(t.to(device));
}

std::vector<torch::Tensor> params_of(std::initializer_list<const nn::Module*> mods) {
  std::vector<torch::Tensor> out;
  for (const auto* m : mods)
    for (const auto& t : m->parameters()) out.push_back(t);
  return out;
}

// Activation recomputation: `f` runs without keeping its intermediate activations, only its
// input, and runs again in the backward pass (the reentrant form of activation checkpointing).
// `f` must outlive the backward pass; the module members that hold the functions do. The
// recomputation runs under the forward pass's autocast state (mixed precision), so that it computes
// the same values in the same dtypes.
class Recomputed : public torch::autograd::Function<Recomputed> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x,
                               const LayerFn* f) {
    ctx->save_for_backward({x});
    ctx->saved_data["f"] = reinterpret_cast<std::int64_t>(f);
    const AutocastState state = AutocastState::current();
    ctx->saved_data["autocast_cpu"] = state.cpu;
    ctx->saved_data["autocast_cuda"] = state.cuda;
    ctx->saved_data["autocast_cpu_dtype"] = static_cast<std::int64_t>(state.cpu_dtype);
    ctx->saved_data["autocast_cuda_dtype"] = static_cast<std::int64_t>(state.cuda_dtype);
    return (*f)(x);  // autograd is off here: nothing inside f is kept
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    auto x = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    const auto* f = reinterpret_cast<const LayerFn*>(ctx->saved_data["f"].toInt());
    const AutocastState state{
        ctx->saved_data["autocast_cpu"].toBool(), ctx->saved_data["autocast_cuda"].toBool(),
        static_cast<at::ScalarType>(ctx->saved_data["autocast_cpu_dtype"].toInt()),
        static_cast<at::ScalarType>(ctx->saved_data["autocast_cuda_dtype"].toInt())};
    torch::Tensor y;
    {
      torch::AutoGradMode on(true);
      AutocastScope as_forward(state);
      y = (*f)(x);
    }
    torch::autograd::backward({y}, {grad[0]});  // parameters' gradients accumulate here
    return {x.grad(), torch::Tensor()};
  }
};

// Layers "layers.i" (Linear + ReLU) and "head" (Linear + cross-entropy).
class Mlp : public ClassifierStack {
 public:
  Mlp(std::int64_t in, std::int64_t hidden, int layers, std::int64_t out)
      : in_(in), hidden_(hidden) {
    std::int64_t width = in;
    for (int i = 0; i < layers; ++i) {
      layers_.push_back(register_module("fc" + std::to_string(i), nn::Linear(width, hidden)));
      width = hidden;
    }
    head_ = register_module("head", nn::Linear(width, out));
    num_layers_ = layers + 1;
    for (int i = 0; i < layers; ++i)
      layer_fns_.push_back([this, i](const torch::Tensor& x) {
        return torch::relu(linear(x, layers_[static_cast<std::size_t>(i)]));
      });
  }
  std::vector<std::int64_t> activation_shape(int layer, std::int64_t n) const override {
    return {n, layer == 0 ? in_ : hidden_};
  }

 private:
  const nn::Module& layer_module(int l) const override {
    return l + 1 < num_layers_ ? static_cast<const nn::Module&>(*layers_[l]) : *head_;
  }
  torch::Tensor logits(const torch::Tensor& x) override { return linear(x, head_); }
  torch::Tensor linear(const torch::Tensor& x, const nn::Linear& l) const {
    return weights_.linear(x, l->weight, l->bias);
  }
  std::vector<std::pair<std::string, std::vector<torch::Tensor>>> op_parameters() override {
    std::vector<std::pair<std::string, std::vector<torch::Tensor>>> out;
    for (std::size_t i = 0; i < layers_.size(); ++i)
      out.push_back({"layers." + std::to_string(i) + ".fc", layers_[i]->parameters()});
    out.push_back({"head.fc", head_->parameters()});
    return out;
  }

  std::int64_t in_, hidden_;
  std::vector<nn::Linear> layers_;
  nn::Linear head_{nullptr};
};

// What distinguishes the decoders the zoo describes: GPT (LayerNorm, GELU MLP, biases, learned
// positions) and Llama (RMSNorm, SwiGLU, no biases, rotary positions, grouped-query attention).
struct DecoderShape {
  std::int64_t vocab = 0, positions = 0, hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0,
               seq = 0;
  int layers = 0;
  bool rms_norm = false, swiglu = false, bias = true, rope = false, tied = true;
  bool causal = true;  // false: every position attends to every other (a ViT's encoder)
  bool pre_norm = true;  // false: each norm after its residual sum (BERT's post-norm blocks)
  std::int64_t experts = 0, top_k = 0;  // a mixture of SwiGLU experts in place of the MLP (Mixtral)
};

// RMSNorm (no bias): x / sqrt(mean(x^2) + eps) * w.
class RmsNorm : public nn::Module {
 public:
  explicit RmsNorm(std::int64_t width)
      : weight(register_parameter("weight", torch::ones({width}))) {}
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& w) const {
    return x * torch::rsqrt(x.pow(2).mean(-1, true) + 1e-5) * w;
  }
  torch::Tensor weight;
};

// A weight every rank of a tensor-parallel group holds whole: under sequence parallelism each rank
// applies it to its own positions only, so its gradient is summed over the group.
torch::Tensor whole_weight(const torch::Tensor& w, const TensorParallel& tp) {
  return tp.sequence_parallel() && w.defined() ? copy_to_group(w, tp) : w;
}

// A LayerNorm or an RMSNorm, registered on its owner.
struct Norm {
  nn::LayerNorm ln{nullptr};
  std::shared_ptr<RmsNorm> rms;
  Norm() = default;
  Norm(nn::Module& owner, const std::string& name, bool use_rms, std::int64_t width) {
    if (use_rms)
      rms = owner.register_module(name, std::make_shared<RmsNorm>(width));
    else
      ln = owner.register_module(name, nn::LayerNorm(nn::LayerNormOptions({width})));
  }
  torch::Tensor operator()(const torch::Tensor& x, const TensorParallel& tp,
                           const ShardedWeights& weights) const {
    auto w = [&](const torch::Tensor& t) { return whole_weight(weights.whole(t), tp); };
    return rms ? rms->forward(x, w(rms->weight))
               : torch::layer_norm(x, {ln->options.normalized_shape()}, w(ln->weight), w(ln->bias),
                                   ln->options.eps());
  }
  const nn::Module* module() const {
    return rms ? static_cast<const nn::Module*>(rms.get()) : ln.get();
  }
};

// One decoder block, pre-norm (post-norm for BERT: DecoderShape::pre_norm). Under tensor
// parallelism (Megatron-LM's split): QKV by key/value head groups and the MLP's first GEMM by
// columns (column-parallel), the projection and the second GEMM by the matching input features
// (row-parallel, partial sums all-reduced); norms and the row-parallel biases stay whole. With
// sequence parallelism the block's input and output are this rank's positions: the norms' outputs
// are all-gathered into the column-parallel GEMMs and the row-parallel outputs reduce-scattered
// (instead of all-reduced).
class Block : public nn::Module {
 public:
  Block(const DecoderShape& d, const torch::Tensor* causal, const torch::Tensor* rope_cos,
        const torch::Tensor* rope_sin, const TensorParallel* tp, const ShardedWeights* weights)
      : d_(d),
        causal_(causal),
        cos_(rope_cos),
        sin_(rope_sin),
        tp_(tp),
        weights_(weights),
        local_heads_(d.heads),
        local_kv_(d.kv_heads),
        local_ffn_(d.ffn),
        experts_{0, d.experts} {
    const std::int64_t q = d.heads * d.head_dim, kv = d.kv_heads * d.head_dim;
    norm1_ = Norm(*this, "norm1", d.rms_norm, d.hidden);
    qkv_ = register_module("qkv", nn::Linear(nn::LinearOptions(d.hidden, q + 2 * kv).bias(d.bias)));
    proj_ = register_module("proj", nn::Linear(nn::LinearOptions(q, d.hidden).bias(d.bias)));
    norm2_ = Norm(*this, "norm2", d.rms_norm, d.hidden);
    if (d.experts > 0) {
      // Each expert's two GEMMs as one tensor over the experts, initialised as nn::Linear's.
      router_ =
          register_module("router", nn::Linear(nn::LinearOptions(d.hidden, d.experts).bias(false)));
      const double a = 1.0 / std::sqrt(static_cast<double>(d.hidden)),
                   b = 1.0 / std::sqrt(static_cast<double>(d.ffn));
      gate_up_ = register_parameter("gate_up",
                                    torch::empty({d.experts, 2 * d.ffn, d.hidden}).uniform_(-a, a));
      down_ =
          register_parameter("down", torch::empty({d.experts, d.hidden, d.ffn}).uniform_(-b, b));
    } else {
      fc1_ = register_module(
          "fc1", nn::Linear(nn::LinearOptions(d.hidden, (d.swiglu ? 2 : 1) * d.ffn).bias(d.bias)));
      fc2_ = register_module("fc2", nn::Linear(nn::LinearOptions(d.ffn, d.hidden).bias(d.bias)));
    }
    whole_ = [this](const torch::Tensor& x) { return body(x, false); };
    core_ = [this](const torch::Tensor& qkv) { return attention_core(qkv); };
  }

  torch::Tensor forward(const torch::Tensor& x, cost::Recompute recompute,
                        cost::Attention attention) {
    fused_ = cost::fused(attention);
    if (recompute == cost::Recompute::full) return run_layer(whole_, x, true);
    return body(x, recompute == cost::Recompute::selective || (fused_ && !kFusedAttentionKernel));
  }

  Result<bool> shard(ShardLayouts& layouts) {
    if (auto ok = shard_attention(layouts, *tp_); !ok) return ok;
    return shard_ffn(layouts, *tp_);
  }

  // In a batch program over `group`: the attention and/or the MLP (or the experts) split by tensor
  // as shard() splits them, each rank computing its part for the replica's samples (`samples`:
  // each rank's count of the pass, gathered in and reduce-scattered out). The split weights are
  // added to `split` (their gradients are the replica's sums of this rank's slices). `group` and
  // `samples` must outlive the module's use.
  Result<bool> split_branches(ShardLayouts& layouts, const TensorParallel& group,
                              const std::vector<std::int64_t>* samples, bool attention, bool ffn,
                              std::vector<torch::Tensor>& split) {
    batch_group_ = &group;
    samples_ = samples;
    if (attention) {
      if (auto ok = shard_attention(layouts, group); !ok) return ok;
      attention_by_tensor_ = true;
      split.push_back(qkv_->weight);
      if (d_.bias) split.push_back(qkv_->bias);
      split.push_back(proj_->weight);
    }
    if (ffn) {
      if (auto ok = shard_ffn(layouts, group); !ok) return ok;
      ffn_by_tensor_ = true;
      if (d_.experts > 0) {
        split.insert(split.end(), {gate_up_, down_});
      } else {
        split.push_back(fc1_->weight);
        if (d_.bias) split.push_back(fc1_->bias);
        split.push_back(fc2_->weight);
      }
    }
    return true;
  }

  // The block's ops with weights, under their names in the description (`prefix`: "layers.i").
  void add_op_parameters(const std::string& prefix,
                         std::vector<std::pair<std::string, std::vector<torch::Tensor>>>& out) {
    out.push_back({prefix + ".norm1", params_of({norm1_.module()})});
    out.push_back({prefix + ".attn.qkv", qkv_->parameters()});
    out.push_back({prefix + ".attn.proj", proj_->parameters()});
    out.push_back({prefix + ".norm2", params_of({norm2_.module()})});
    if (d_.experts > 0) {
      out.push_back({prefix + ".moe.router", router_->parameters()});
      out.push_back({prefix + ".moe.gate_up", {gate_up_}});
      out.push_back({prefix + ".moe.down", {down_}});
      return;
    }
    out.push_back({prefix + (d_.swiglu ? ".mlp.gate_up" : ".mlp.fc1"), fc1_->parameters()});
    out.push_back({prefix + (d_.swiglu ? ".mlp.down" : ".mlp.fc2"), fc2_->parameters()});
  }

 private:
  // QKV by key/value head groups, the projection by the matching input features, over `tp`.
  Result<bool> shard_attention(ShardLayouts& layouts, const TensorParallel& tp) {
    auto groups = unit_range(d_.kv_heads, tp, "key/value heads");
    if (!groups) return groups.error();
    const std::int64_t hd = d_.head_dim, per = d_.heads / d_.kv_heads;
    const auto [k0, k1] = *groups;
    const std::int64_t q = d_.heads * hd, kv = d_.kv_heads * hd;
    const std::vector<std::pair<std::int64_t, std::int64_t>> qkv_rows = {
        {k0 * per * hd, k1 * per * hd},
        {q + k0 * hd, q + k1 * hd},
        {q + kv + k0 * hd, q + kv + k1 * hd}};
    layouts.keep(qkv_->weight, 0, qkv_rows);
    if (d_.bias) layouts.keep(qkv_->bias, 0, qkv_rows);
    layouts.keep(proj_->weight, 1, {{k0 * per * hd, k1 * per * hd}});
    local_kv_ = k1 - k0;
    local_heads_ = local_kv_ * per;
    return true;
  }
  // The MLP by columns (the first GEMM's outputs, the second's inputs), or whole experts per rank
  // with the router whole, over `tp`.
  Result<bool> shard_ffn(ShardLayouts& layouts, const TensorParallel& tp) {
    auto cols = d_.experts > 0 ? unit_range(d_.experts, tp, "experts")
                               : unit_range(d_.ffn, tp, "MLP columns");
    if (!cols) return cols.error();
    if (d_.experts > 0) {
      experts_ = *cols;
      layouts.keep(gate_up_, 0, {experts_});
      layouts.keep(down_, 0, {experts_});
      return true;
    }
    const auto [f0, f1] = *cols;
    std::vector<std::pair<std::int64_t, std::int64_t>> fc1_rows = {{f0, f1}};
    if (d_.swiglu) fc1_rows.push_back({d_.ffn + f0, d_.ffn + f1});
    layouts.keep(fc1_->weight, 0, fc1_rows);
    if (d_.bias) layouts.keep(fc1_->bias, 0, fc1_rows);
    layouts.keep(fc2_->weight, 1, {{f0, f1}});
    local_ffn_ = f1 - f0;
    return true;
  }

  // Into a branch (the attention or the MLP) and out of it. By tensor in a batch program
  // (`by_samples`): the replica's samples all-gathered in, the row-split output's partial sums
  // reduce-scattered to each rank's samples. Else Megatron-LM's f and g over the tensor-parallel
  // group (under sequence parallelism, the positions gathered in and reduce-scattered out).
  torch::Tensor enter(const torch::Tensor& t, bool by_samples) const {
    if (by_samples) return gather_shards(t, *batch_group_, 0, *samples_);
    return tp_->sequence_parallel() ? gather_sequence(t, *tp_) : copy_to_group(t, *tp_);
  }
  torch::Tensor leave(const torch::Tensor& t, bool by_samples) const {
    if (by_samples) return reduce_scatter_shards(t, *batch_group_, 0, *samples_);
    return tp_->sequence_parallel() ? reduce_scatter_sequence(t, *tp_) : reduce_from_group(t, *tp_);
  }

  torch::Tensor body(const torch::Tensor& x, bool recompute_core) {
    namespace F = torch::nn::functional;
    const TensorParallel& tp = *tp_;
    // A weight as the pass uses it: gathered when a batch program shards it.
    auto w = [this](const torch::Tensor& t) { return weights_->whole(t); };
    // Pre-norm: each branch reads the norm of the residual stream; post-norm: the stream is
    // normed after each residual sum.
    const bool pre = d_.pre_norm;
    const bool attn_split = attention_by_tensor_, ffn_split = ffn_by_tensor_;
    const auto a = enter(pre ? norm1_(x, tp, *weights_) : x, attn_split);
    const auto ctx =
        run_layer(core_, weights_->linear(a, qkv_->weight, qkv_->bias), recompute_core);
    // A row-parallel output is summed over the group before its bias is added; without a group
    // the bias goes into the linear op (a batch program's shards of both then move together).
    const bool attn_rows = tp.active() || attn_split, ffn_rows = tp.active() || ffn_split;
    auto y =
        x + leave(weights_->linear(ctx, proj_->weight, attn_rows ? torch::Tensor() : proj_->bias),
                  attn_split);
    if (d_.bias && attn_rows) y = y + whole_weight(w(proj_->bias), tp);
    if (!pre) y = norm1_(y, tp, *weights_);
    const auto b = enter(pre ? norm2_(y, tp, *weights_) : y, ffn_split);
    torch::Tensor out;
    if (d_.experts > 0) {
      out = y + leave(experts(b), ffn_split);
    } else {
      auto h = weights_->linear(b, fc1_->weight, fc1_->bias);
      h = d_.swiglu ? torch::silu(h.slice(-1, 0, local_ffn_)) * h.slice(-1, local_ffn_)
                    : torch::gelu(h);
      out = y + leave(weights_->linear(h, fc2_->weight, ffn_rows ? torch::Tensor() : fc2_->bias),
                      ffn_split);
      if (d_.bias && ffn_rows) out = out + whole_weight(w(fc2_->bias), tp);
    }
    return pre ? out : norm2_(out, tp, *weights_);
  }
  // Mixtral's top-k mixture of SwiGLU experts over x [n, s, hidden]: each token goes to the k
  // experts with the largest router logits, weighted by the softmax of those k. Under tensor
  // parallelism every rank holds the whole micro-batch's tokens and the router, computes its own
  // experts' part of each token's sum, and the group sums the parts (leave); the router's weight
  // is used through copy_to_group, whose backward pass sums each rank's part of its gradient. (In
  // a batch program the router is a whole weight, its gradient summed over the stage's ranks with
  // the others'.)
  torch::Tensor experts(const torch::Tensor& x) const {
    const auto flat = x.reshape({-1, d_.hidden});
    const auto router = ffn_by_tensor_ ? weights_->whole(router_->weight)
                                       : copy_to_group(weights_->whole(router_->weight), *tp_);
    const auto [top, chosen] = torch::matmul(flat, router.t()).topk(d_.top_k, -1);
    const auto gates = torch::softmax(top, -1);
    const auto gate_up = weights_->whole(gate_up_), down = weights_->whole(down_);
    auto out = torch::zeros_like(flat);
    for (std::int64_t e = experts_.first; e < experts_.second; ++e) {
      const auto hit = chosen == e;
      // Every expert runs, on no token too: its weights then get a (zero) gradient all the same.
      const auto rows = hit.any(-1).nonzero().squeeze(-1);
      const auto gate = (gates * hit).sum(-1).index_select(0, rows).unsqueeze(-1);
      auto h = torch::matmul(flat.index_select(0, rows), gate_up[e - experts_.first].t());
      h = torch::silu(h.slice(-1, 0, d_.ffn)) * h.slice(-1, d_.ffn);
      // (Under autocast the expert's product is 16-bit: summed into the tokens' fp32 outputs.)
      out = out.index_add(
          0, rows, (torch::matmul(h, down[e - experts_.first].t()) * gate).to(out.scalar_type()));
    }
    return out.view_as(x);
  }
  // Rotary positions on [n, heads, s, hd]: pairs (i, i + hd/2) rotated by position x frequency.
  torch::Tensor rotate(const torch::Tensor& t) const {
    const auto half = d_.head_dim / 2;
    const auto rotated = torch::cat({-t.slice(-1, half), t.slice(-1, 0, half)}, -1);
    return t * *cos_ + rotated * *sin_;
  }
  // QK^T, softmax and scores x V of this rank's heads: what selective recomputation drops.
  torch::Tensor attention_core(const torch::Tensor& qkv_out) const {
    const auto n = qkv_out.size(0), s = qkv_out.size(1), hd = d_.head_dim;
    const auto H = local_heads_, K = local_kv_;
    // One split (its backward pass joins the three gradients once; three slices would each
    // write a zeroed gradient of the whole output).
    const auto parts = qkv_out.split_with_sizes({H * hd, K * hd, K * hd}, -1);
    auto q = parts[0].view({n, s, H, hd}).transpose(1, 2);
    auto k = parts[1].view({n, s, K, hd}).transpose(1, 2);
    auto v = parts[2].view({n, s, K, hd}).transpose(1, 2);
    if (d_.rope) {
      q = rotate(q);
      k = rotate(k);
    }
    if (K != H) {  // grouped-query attention: each key/value head serves H / K query heads
      k = k.repeat_interleave(H / K, 1);
      v = v.repeat_interleave(H / K, 1);
    }
#if TORCH_VERSION_MAJOR >= 2
    if (fused_)  // one kernel (flash or memory-efficient, as the device allows) keeps no scores
      return at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/d_.causal)
          .transpose(1, 2)
          .reshape({n, s, H * hd});
#endif
    auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(hd));
    if (d_.causal) scores = scores.masked_fill(*causal_, -std::numeric_limits<float>::infinity());
    return torch::matmul(torch::softmax(scores, -1), v).transpose(1, 2).reshape({n, s, H * hd});
  }

  DecoderShape d_;
  const torch::Tensor* causal_;      // the model's causal mask
  const torch::Tensor *cos_, *sin_;  // the model's rotary tables
  const TensorParallel* tp_;         // the model's tensor-parallel group
  const ShardedWeights* weights_;    // the model's sharded weights (batch programs)
  // A batch program's group and each rank's samples of the pass, where a branch goes by tensor.
  const TensorParallel* batch_group_ = nullptr;
  const std::vector<std::int64_t>* samples_ = nullptr;
  bool attention_by_tensor_ = false, ffn_by_tensor_ = false;
  std::int64_t local_heads_, local_kv_, local_ffn_;
  std::pair<std::int64_t, std::int64_t> experts_;  // this rank's experts [first, second)
  Norm norm1_, norm2_;
  nn::Linear qkv_{nullptr}, proj_{nullptr}, fc1_{nullptr}, fc2_{nullptr}, router_{nullptr};
  torch::Tensor gate_up_, down_;  // [experts, 2 ffn, hidden], [experts, hidden, ffn]
  LayerFn whole_, core_;
  bool fused_ = false;  // the pass runs the core as one kernel (set by forward)
};

// A transformer as the descriptions lay it out: layer 0 the embedding, then the blocks, the last
// layer the head.
class BlockStack : public TrainModule {
 public:
  std::vector<torch::Tensor> layer_parameters(int first, int count) override {
    std::vector<torch::Tensor> out;
    for (int l = first; l < first + count; ++l) {
      const auto part = l == 0                ? embedding_parameters()
                        : l + 1 < num_layers_ ? params_of({blocks_[l - 1].get()})
                                              : head_parameters();
      out.insert(out.end(), part.begin(), part.end());
    }
    return out;
  }

 protected:
  virtual std::vector<torch::Tensor> embedding_parameters() = 0;
  virtual std::vector<torch::Tensor> head_parameters() = 0;
  // Under `tp`, kept in `mine` (what the blocks read): the blocks split as the decoders' (by
  // key/value head groups and MLP columns); the rest stays whole on every rank. Sequence
  // parallelism is refused (`model` names the model in the message).
  Result<bool> shard_blocks(TensorParallel& mine, const TensorParallel& tp, const char* model) {
    mine = tp;
    if (!mine.active()) return true;
    if (mine.sequence_parallel())
      return Error{fmt::format(
          "sequence parallelism: the runtime splits decoders by sequence, not {}", model)};
    for (auto& b : blocks_)
      if (auto ok = b->shard(layouts_); !ok) return ok;
    return true;
  }
  std::vector<std::shared_ptr<Block>> blocks_;
};

// Layers "embedding" (words, and learned positions for GPT), "layers.i" (blocks) and "head"
// (final norm, LM head, cross-entropy).
class Decoder : public BlockStack {
 public:
  explicit Decoder(const DecoderShape& d)
      : d_(d), word_(register_module("word", nn::Embedding(d.vocab, d.hidden))) {
    if (d.positions > 0) pos_ = register_module("pos", nn::Embedding(d.positions, d.hidden));
    for (int i = 0; i < d.layers; ++i)
      blocks_.push_back(
          register_module("block" + std::to_string(i),
                          std::make_shared<Block>(d, &causal_, &cos_, &sin_, &tp_, &weights_)));
    norm_ = Norm(*this, "norm", d.rms_norm, d.hidden);
    if (!d.tied)
      head_ = register_module("head", nn::Linear(nn::LinearOptions(d.hidden, d.vocab).bias(false)));
    causal_ = torch::ones({d.seq, d.seq}, torch::kBool).triu(1);
    if (d.rope) {
      const auto half = d.head_dim / 2;
      const auto freq = torch::pow(10000.0, -torch::arange(half, torch::kDouble) / half);
      const auto angle = torch::outer(torch::arange(d.seq, torch::kDouble), freq);
      cos_ = torch::cat({angle.cos(), angle.cos()}, -1).to(torch::kFloat);
      sin_ = torch::cat({angle.sin(), angle.sin()}, -1).to(torch::kFloat);
    }
    // GPT-2's initialisation of the embeddings (libtorch's default, N(0, 1), makes the tied
    // head's first logits far too large).
    torch::NoGradGuard no_grad;
    word_->weight.normal_(0.0, 0.02);
    if (pos_) pos_->weight.normal_(0.0, 0.02);
    num_layers_ = d.layers + 2;
    positions_ = {0, d.seq};
  }
  torch::Tensor forward_layers(int first, int count, const torch::Tensor& x,
                               const torch::Tensor& targets) override {
    // Under sequence parallelism a stage takes and passes on whole activations, and holds only
    // its positions in between.
    torch::Tensor y = first > 0 ? scatter_sequence(x, tp_) : x;
    for (int l = first; l < first + count; ++l) {
      if (l == 0) {
        y = embed(y);
        if (pos_) {
          const auto [p0, p1] = positions_;
          y = y + torch::embedding(
                      whole_weight(weights_.whole(pos_->weight), tp_),
                      torch::arange(p0, p1, torch::TensorOptions(torch::kLong).device(y.device())));
        }
      } else if (l + 1 < num_layers_) {
        y = blocks_[l - 1]->forward(y, recompute_, attention_);
      } else {
        y = norm_(y, tp_, weights_);
        if (batch_.vocab_head) {
          y = batch_vocab_head(y, targets);
          continue;
        }
        const torch::Tensor h =
            tp_.sequence_parallel() ? gather_sequence(y, tp_) : copy_to_group(y, tp_);
        // A batch program's head reads a vocabulary-split (tied) table whole, gathered.
        torch::Tensor logits =
            head_                  ? weights_.linear(h, head_->weight, {})
            : head_copy_.defined() ? torch::matmul(h, head_copy_.t())
            : batch_.vocab_embedding
                ? linear_by_rows(h, word_->weight, batch_.group, vocab_counts_, d_.vocab)
                : weights_.linear(h, word_->weight, {});
        logits = logits.reshape({-1, logits.size(-1)});
        // Each sample's loss is the mean over its tokens.
        y = (tp_.active() ? vocab_parallel_cross_entropy(logits, targets.reshape({-1}), tp_)
                          : summed_cross_entropy(logits, targets.reshape({-1}))) /
            static_cast<double>(d_.seq);
      }
    }
    return first + count < num_layers_ ? gather_sequence_whole(y, tp_) : y;
  }
  std::vector<std::int64_t> activation_shape(int layer, std::int64_t n) const override {
    if (layer == 0) return {n, d_.seq};  // token ids
    return {n, d_.seq, d_.hidden};
  }
  std::vector<torch::Tensor> embedding_parameters() override {
    return pos_ ? params_of({word_.get(), pos_.get()}) : params_of({word_.get()});
  }
  std::vector<torch::Tensor> head_parameters() override {
    auto out = head_ ? params_of({norm_.module(), head_.get()}) : params_of({norm_.module()});
    if (head_copy_.defined()) out.push_back(head_copy_);
    return out;
  }
  Result<bool> shard(const TensorParallel& tp) override {
    tp_ = tp;
    positions_ = {0, d_.seq};
    if (!tp_.active()) return true;
    if (tp_.sequence_parallel()) {
      if (static_cast<int>(tp_.sequence.size()) != tp_.size)
        return Error{"sequence parallelism: one count of positions per tensor-parallel rank"};
      std::int64_t p0 = 0;
      for (int i = 0; i < tp_.rank; ++i) p0 += tp_.sequence[i];
      positions_ = {p0, p0 + tp_.sequence[tp_.rank]};
    }
    for (auto& b : blocks_)
      if (auto ok = b->shard(layouts_); !ok) return ok;
    // The word embedding and the LM head by vocabulary rows (Megatron-LM's vocab-parallel
    // embedding and head); positions stay whole.
    auto rows = unit_range(d_.vocab, tp_, "vocabulary rows");
    if (!rows) return rows.error();
    vocab_ = *rows;
    layouts_.keep(word_->weight, 0, {vocab_});
    if (head_) layouts_.keep(head_->weight, 0, {vocab_});
    return true;
  }
  Result<bool> split_batch(const BatchProgram& prog) override {
    if (auto ok = shard_ops(prog); !ok) return ok;
    const auto& branches = batch_.tensor_branches;
    for (std::size_t i = 0; i < blocks_.size(); ++i) {
      const std::string block = "layers." + std::to_string(i);
      auto has = [&](const char* branch) {
        return std::find(branches.begin(), branches.end(), block + branch) != branches.end();
      };
      const bool attention = has(".attn"), ffn = has(".mlp") || has(".moe");
      if (!attention && !ffn) continue;
      if (auto ok = blocks_[i]->split_branches(layouts_, batch_.group, &samples_, attention, ffn,
                                               sharded_);
          !ok)
        return ok;
    }
    if (!prog.vocab_embedding && !prog.vocab_head) return true;
    auto counts = unit_counts(d_.vocab, batch_.group, "vocabulary rows");
    if (!counts) return counts.error();
    vocab_counts_ = *counts;
    std::int64_t v0 = 0;
    for (int i = 0; i < batch_.group.rank; ++i) v0 += vocab_counts_[i];
    vocab_ = {v0, v0 + vocab_counts_[batch_.group.rank]};
    if (prog.vocab_embedding) {
      layouts_.keep(word_->weight, 0, {vocab_});
      sharded_.push_back(word_->weight);
    }
    if (prog.vocab_head && head_) {
      layouts_.keep(head_->weight, 0, {vocab_});
      sharded_.push_back(head_->weight);
    }
    return true;
  }
  bool tied_head() const override { return !head_; }
  void to_device(const torch::Device& device) override {
    to(device);
    move_tensor(head_copy_, device);
    causal_ = causal_.to(device);
    if (cos_.defined()) cos_ = cos_.to(device), sin_ = sin_.to(device);
  }
  std::pair<torch::Tensor, torch::Tensor> untie_head() override {
    if (head_) return {};
    if (!head_copy_.defined()) {
      head_copy_ = word_->weight.detach().clone().requires_grad_(true);
      layouts_.same_as(word_->weight, head_copy_);
    }
    return {word_->weight, head_copy_};
  }

 private:
  // Token embeddings; split by vocabulary rows, each rank looks up its own rows and the group sums
  // (under sequence parallelism, each rank keeping the sums of its positions).
  torch::Tensor embed(const torch::Tensor& ids) {
    if (batch_.replicate_embedding)  // the replica's samples' ids, whole -> this rank's samples
      return scatter_shards(
          torch::embedding(gradient_on_first_rank(word_->weight, batch_.group), ids), batch_.group,
          0, samples_);
    if (batch_.vocab_embedding) {  // the replica's samples' ids -> the sums of this rank's samples
      const auto [v0, v1] = vocab_;
      const auto mine = (ids >= v0) & (ids < v1);
      const auto local = (ids - v0).clamp(0, v1 - v0 - 1);
      return reduce_scatter_shards(torch::embedding(word_->weight, local) * mine.unsqueeze(-1),
                                   batch_.group, 0, samples_);
    }
    if (!tp_.active()) return torch::embedding(weights_.whole(word_->weight), ids);
    const auto [v0, v1] = vocab_;
    const auto mine = (ids >= v0) & (ids < v1);
    const auto local = (ids - v0).clamp(0, v1 - v0 - 1);
    const auto e = torch::embedding(word_->weight, local) * mine.unsqueeze(-1);
    return tp_.sequence_parallel() ? reduce_scatter_sequence(e, tp_) : reduce_from_group(e, tp_);
  }
  // Summed cross-entropy over rows of logits split by vocabulary: the group's maximum, the sum of
  // exponentials and the target's logit are summed over the ranks (Megatron-LM). In fp32 whatever
  // the logits' dtype, as Megatron-LM and autocast's own cross-entropy compute it.
  torch::Tensor vocab_parallel_cross_entropy(const torch::Tensor& low_logits,
                                             const torch::Tensor& targets,
                                             const TensorParallel& group) {
    const torch::Tensor logits = low_logits.to(torch::kFloat);
    const auto [v0, v1] = vocab_;
    const auto top = max_over_group(std::get<0>(logits.detach().max(1)), group);
    const auto sum_exp = reduce_from_group((logits - top.unsqueeze(1)).exp().sum(1), group);
    const auto mine = (targets >= v0) & (targets < v1);
    const auto local = (targets - v0).clamp(0, v1 - v0 - 1);
    const auto target_logit =
        reduce_from_group(logits.gather(1, local.unsqueeze(1)).squeeze(1) * mine, group);
    return (sum_exp.log() + top - target_logit).sum();
  }
  // A batch program's vocabulary-split head: the ranks' samples gathered (the gradient
  // reduce-scattered back), their logits for this rank's vocabulary rows, and the replica's
  // vocabulary-parallel loss (`targets`: the replica's).
  torch::Tensor batch_vocab_head(const torch::Tensor& y, const torch::Tensor& targets) {
    const torch::Tensor h = gather_shards(y, batch_.group, 0, samples_);
    const auto [v0, v1] = vocab_;
    const torch::Tensor rows = head_ ? head_->weight
                               : batch_.vocab_embedding
                                   ? word_->weight
                                   : weights_.whole(word_->weight).slice(0, v0, v1);
    const torch::Tensor logits = torch::matmul(h, rows.t());
    return vocab_parallel_cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                        targets.reshape({-1}), batch_.group) /
           static_cast<double>(d_.seq);
  }

  std::vector<std::pair<std::string, std::vector<torch::Tensor>>> op_parameters() override {
    std::vector<std::pair<std::string, std::vector<torch::Tensor>>> out;
    out.push_back({"embedding.word", {word_->weight}});
    if (pos_) out.push_back({"embedding.position", {pos_->weight}});
    for (std::size_t i = 0; i < blocks_.size(); ++i)
      blocks_[i]->add_op_parameters("layers." + std::to_string(i), out);
    out.push_back({"head.norm", params_of({norm_.module()})});
    if (head_) out.push_back({"head.lm_head", {head_->weight}});
    return out;
  }

  DecoderShape d_;
  TensorParallel tp_;
  std::pair<std::int64_t, std::int64_t> vocab_{0, 0};
  std::vector<std::int64_t> vocab_counts_;  // a batch program's vocabulary split, per rank
  std::pair<std::int64_t, std::int64_t> positions_{0, 0};  // this rank's, [begin, end)
  nn::Embedding word_, pos_{nullptr};
  Norm norm_;
  nn::Linear head_{nullptr};
  torch::Tensor head_copy_;  // the tied head's own copy when a pipeline splits it off
  torch::Tensor causal_, cos_, sin_;
};

// ViT (Dosovitskiy et al. 2021): layers "embedding" (each patch's pixels projected, a GEMM, then
// the class token first and learned positions added), "layers.i" (GPT-style pre-norm blocks
// without the causal mask) and "head" (final LayerNorm, the classifier of the class token, summed
// cross-entropy). Its weights are drawn as the op graph draws the description's (the patch
// convolution's as a linear layer's, the same numbers), so both forms train alike. Under tensor
// parallelism the blocks split as the decoders' do (by heads and MLP columns); the embedding and
// the classifier stay whole on every rank, each computing the same.
struct VitShape {
  std::int64_t channels = 3, patch = 0, image = 0, classes = 0;
};

class VisionTransformer : public BlockStack {
 public:
  VisionTransformer(const DecoderShape& d, const VitShape& v) : d_(d), v_(v) {
    patch_ = register_module("patch", nn::Linear(v.channels * v.patch * v.patch, d.hidden));
    positions_ = register_parameter("positions", 0.02 * torch::randn({d.seq, d.hidden}));
    class_ = register_parameter("class", 0.02 * torch::randn({1, d.hidden}));
    for (int i = 0; i < d.layers; ++i)
      blocks_.push_back(
          register_module("block" + std::to_string(i),
                          std::make_shared<Block>(d, &none_, &none_, &none_, &tp_, &weights_)));
    norm_ = Norm(*this, "norm", false, d.hidden);
    classifier_ = register_module("classifier", nn::Linear(d.hidden, v.classes));
    num_layers_ = d.layers + 2;
  }
  torch::Tensor forward_layers(int first, int count, const torch::Tensor& x,
                               const torch::Tensor& targets) override {
    torch::Tensor y = x;
    for (int l = first; l < first + count; ++l) {
      if (l == 0) {
        const std::int64_t n = y.size(0), side = v_.image / v_.patch, p = v_.patch;
        const auto patches = y.reshape({n, v_.channels, side, p, side, p})
                                 .permute({0, 2, 4, 1, 3, 5})
                                 .reshape({n, side * side, v_.channels * p * p});
        y = torch::cat({class_.expand({n, 1, d_.hidden}), patch_(patches)}, 1) + positions_;
      } else if (l + 1 < num_layers_) {
        y = blocks_[l - 1]->forward(y, recompute_, attention_);
      } else {
        const auto h = norm_(y, tp_, weights_).select(1, 0);  // the class token
        y = summed_cross_entropy(classifier_(h), targets);
      }
    }
    return y;
  }
  std::vector<std::int64_t> activation_shape(int layer, std::int64_t n) const override {
    if (layer == 0) return {n, v_.channels, v_.image, v_.image};
    return {n, d_.seq, d_.hidden};
  }
  std::vector<torch::Tensor> embedding_parameters() override {
    auto out = params_of({patch_.get()});
    out.push_back(positions_);
    out.push_back(class_);
    return out;
  }
  std::vector<torch::Tensor> head_parameters() override {
    return params_of({norm_.module(), classifier_.get()});
  }
  Result<bool> shard(const TensorParallel& tp) override { return shard_blocks(tp_, tp, "a ViT"); }

 private:
  DecoderShape d_;
  VitShape v_;
  TensorParallel tp_;
  nn::Linear patch_{nullptr}, classifier_{nullptr};
  torch::Tensor positions_, class_, none_;
  Norm norm_;
};

// BERT pre-training (BertForPreTraining, as model/bert_builder.cc describes it): layers
// "embedding" (word table, learned positions, two token types: type 0 for the first half of the
// positions, then a LayerNorm), "layers.i" (post-norm blocks without the causal mask) and "head":
// masked language modelling (a dense layer, GELU, LayerNorm, the word table's transpose with a
// bias of its own; each sample's summed loss over its labelled tokens divided by the sequence
// length) plus next-sentence prediction (the pooler, tanh, on the first token, then a 2-way
// classifier whose label is the targets' last column). Its weights are drawn as the op graph
// draws the description's, so both forms train alike. Under tensor parallelism the blocks split
// as the decoders' do; the embedding and both heads stay whole on every rank, each computing the
// same.
struct BertShape {
  std::int64_t vocab = 0, type_vocab = 2;
};

class Bert : public BlockStack {
 public:
  Bert(const DecoderShape& d, const BertShape& b) : d_(d), b_(b) {
    word_ = register_parameter("word", 0.02 * torch::randn({b.vocab, d.hidden}));
    positions_ = register_parameter("positions", 0.02 * torch::randn({d.seq, d.hidden}));
    types_ = register_parameter("types", 0.02 * torch::randn({b.type_vocab, d.hidden}));
    embedding_norm_ = Norm(*this, "embedding_norm", false, d.hidden);
    for (int i = 0; i < d.layers; ++i)
      blocks_.push_back(
          register_module("block" + std::to_string(i),
                          std::make_shared<Block>(d, &none_, &none_, &none_, &tp_, &weights_)));
    dense_ = register_module("mlm_dense", nn::Linear(d.hidden, d.hidden));
    mlm_norm_ = Norm(*this, "mlm_norm", false, d.hidden);
    decoder_bias_ = register_parameter("mlm_bias", torch::zeros({b.vocab}));
    pooler_ = register_module("pooler", nn::Linear(d.hidden, d.hidden));
    nsp_ = register_module("nsp", nn::Linear(d.hidden, 2));
    const auto s = d.seq;
    type_ids_ =
        (torch::arange(s, torch::kLong) >= s / 2).to(torch::kLong).clamp_max(b.type_vocab - 1);
    num_layers_ = d.layers + 2;
  }
  torch::Tensor forward_layers(int first, int count, const torch::Tensor& x,
                               const torch::Tensor& targets) override {
    torch::Tensor y = x;
    for (int l = first; l < first + count; ++l) {
      if (l == 0) {
        y = torch::embedding(word_, y) + positions_ + types_.index_select(0, type_ids_);
        y = embedding_norm_(y, tp_, weights_);
      } else if (l + 1 < num_layers_) {
        y = blocks_[l - 1]->forward(y, recompute_, attention_);
      } else {
        const auto t = mlm_norm_(torch::gelu(dense_(y)), tp_, weights_);
        const auto logits =
            torch::linear(t, word_copy_.defined() ? word_copy_ : word_, decoder_bias_);
        const auto tokens = targets.slice(1, 0, d_.seq).reshape({-1});
        const auto mlm = summed_cross_entropy(logits.reshape({-1, b_.vocab}), tokens) /
                         static_cast<double>(d_.seq);
        const auto pooled = torch::tanh(pooler_(y.select(1, 0)));
        y = mlm + summed_cross_entropy(nsp_(pooled), targets.select(1, d_.seq));
      }
    }
    return y;
  }
  std::vector<std::int64_t> activation_shape(int layer, std::int64_t n) const override {
    if (layer == 0) return {n, d_.seq};  // token ids
    return {n, d_.seq, d_.hidden};
  }
  std::vector<torch::Tensor> embedding_parameters() override {
    std::vector<torch::Tensor> out{word_, positions_, types_};
    for (const auto& p : params_of({embedding_norm_.module()})) out.push_back(p);
    return out;
  }
  std::vector<torch::Tensor> head_parameters() override {
    auto out = params_of({dense_.get(), mlm_norm_.module()});
    out.push_back(decoder_bias_);
    for (const auto& p : params_of({pooler_.get(), nsp_.get()})) out.push_back(p);
    if (word_copy_.defined()) out.push_back(word_copy_);
    return out;
  }
  Result<bool> shard(const TensorParallel& tp) override { return shard_blocks(tp_, tp, "BERT"); }
  bool tied_head() const override { return true; }
  void to_device(const torch::Device& device) override {
    to(device);
    move_tensor(word_copy_, device);
    type_ids_ = type_ids_.to(device);
  }
  std::pair<torch::Tensor, torch::Tensor> untie_head() override {
    if (!word_copy_.defined()) {
      word_copy_ = word_.detach().clone().requires_grad_(true);
      layouts_.same_as(word_, word_copy_);
    }
    return {word_, word_copy_};
  }

 private:
  DecoderShape d_;
  BertShape b_;
  TensorParallel tp_;
  torch::Tensor word_, positions_, types_, decoder_bias_, type_ids_, none_;
  torch::Tensor word_copy_;  // the MLM decoder's own copy when a pipeline splits it off
  Norm embedding_norm_, mlm_norm_;
  nn::Linear dense_{nullptr}, pooler_{nullptr}, nsp_{nullptr};
};

// The blocks' sizes the description gives (`qkv`: a block's QKV op, whose parameters beyond its
// GEMM's are biases).
DecoderShape block_shape(const model::Model& m, const model::Op& qkv) {
  DecoderShape d;
  d.hidden = m.hidden;
  d.heads = m.heads;
  d.kv_heads = m.kv_heads;
  d.head_dim = m.head_dim;
  d.ffn = m.ffn_hidden;
  d.seq = m.seq_len;
  d.layers = m.num_blocks;
  d.bias = qkv.params > qkv.gemm.k * qkv.gemm.n;
  return d;
}

std::int64_t count_parameters(const torch::nn::Module& mod) {
  std::int64_t n = 0;
  for (const auto& p : mod.parameters()) n += p.numel();
  return n;
}

}  // namespace

torch::Tensor summed_cross_entropy(const torch::Tensor& logits, const torch::Tensor& targets) {
  return torch::nn::functional::cross_entropy(
      logits, targets, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
}

void release_unheld(const std::vector<std::vector<torch::Tensor>>& units,
                    const std::vector<bool>& held) {
  std::set<const void*> used;  // by a held unit
  for (std::size_t u = 0; u < units.size(); ++u)
    if (held[u])
      for (const auto& t : units[u]) used.insert(t.unsafeGetTensorImpl());
  torch::NoGradGuard no_grad;
  for (std::size_t u = 0; u < units.size(); ++u)
    if (!held[u])
      for (auto t : units[u])
        if (used.count(t.unsafeGetTensorImpl()) == 0) t.set_data(torch::empty({0}, t.options()));
}

void TrainModule::release_layers_except(const std::vector<bool>& held) {
  std::vector<std::vector<torch::Tensor>> layers;
  for (int l = 0; l < num_layers_; ++l) layers.push_back(layer_parameters(l, 1));
  release_unheld(layers, held);
}

Result<bool> TrainModule::split_batch(const BatchProgram& prog) {
  if (prog.vocab_embedding || prog.vocab_head || prog.replicate_embedding)
    return Error{
        "plan: op_overrides: this model has no word embedding or LM head to split by vocabulary "
        "or replicate"};
  return shard_ops(prog);
}

Result<bool> TrainModule::shard_ops(const BatchProgram& prog) {
  batch_ = prog;
  auto ops = op_parameters();
  for (const std::string& name : prog.sharded_ops) {
    auto it =
        std::find_if(ops.begin(), ops.end(), [&](const auto& op) { return op.first == name; });
    if (it == ops.end())
      return Error{fmt::format(
          "plan: op_overrides: op \"{}\" is split batch_sharded, but the runtime's module has no "
          "weights of that name to shard",
          name)};
    for (torch::Tensor& t : it->second) {
      layouts_.record(t, weights_.shard(t));  // its flattened elements' slice
      sharded_.push_back(t);
    }
  }
  return true;
}

torch::Tensor ClassifierStack::forward_layers(int first, int count, const torch::Tensor& x,
                                              const torch::Tensor& targets) {
  torch::Tensor y = x;
  for (int l = first; l < first + count; ++l)
    y = l + 1 < num_layers_ ? run_layer(layer_fns_[l], y, recompute_ == cost::Recompute::full)
                            : summed_cross_entropy(logits(y), targets);
  return y;
}

std::vector<torch::Tensor> ClassifierStack::layer_parameters(int first, int count) {
  std::vector<torch::Tensor> out;
  for (int l = first; l < first + count; ++l)
    for (const auto& t : layer_module(l).parameters()) out.push_back(t);
  return out;
}

// An input that needs no gradient (the first layer's features) is made a leaf that does, so that
// the backward pass reaches f's parameters.
torch::Tensor run_layer(const LayerFn& f, const torch::Tensor& x, bool recompute) {
  if (!recompute) return f(x);
  return Recomputed::apply(x.requires_grad() ? x : x.detach().requires_grad_(true), &f);
}

Result<std::shared_ptr<TrainModule>> build_module(const model::Model& m) {
  std::shared_ptr<TrainModule> mod;
  if (m.family == model::Family::mlp) {
    const model::Op* first = m.ops.empty() ? nullptr : &m.ops.front();
    if (!first || first->kind != model::OpKind::matmul)
      return Error{
          fmt::format("--model: {}: expected an MLP whose first op is a linear layer", m.name)};
    mod = std::make_shared<Mlp>(first->gemm.k, m.hidden, m.num_blocks, m.num_classes);
  } else if (decoder_module(m)) {
    const model::Op* head = find_op(m, "head.lm_head");
    const model::Op* qkv = find_suffix(m, ".qkv");
    if (!head || !qkv || m.hidden <= 0 || m.heads <= 0 || m.kv_heads <= 0 || m.head_dim <= 0)
      return Error{fmt::format(
          "--model: {}: expected a decoder with attention blocks and an LM head", m.name)};
    DecoderShape d = block_shape(m, *qkv);
    d.vocab = m.vocab;
    d.tied = head->tied_params > 0;
    if (const model::Op* pos = find_op(m, "embedding.position"))
      d.positions = pos->params / m.hidden;
    d.rope = find_suffix(m, ".rope") != nullptr;
    d.experts = m.experts;
    d.top_k = m.top_k;
    d.swiglu = find_suffix(m, ".gate_up") != nullptr;
    const model::Op* norm = find_op(m, "head.norm");
    d.rms_norm = norm && norm->kind == model::OpKind::rmsnorm;
    mod = std::make_shared<Decoder>(d);
  } else if (m.family == model::Family::vision_transformer) {
    const model::Op* patch = find_op(m, "embedding.patch");
    const model::Op* qkv = find_suffix(m, ".qkv");
    const std::int64_t side = patch ? patch->compute.kernel_h : 0;
    const model::Op* scores = find_suffix(m, ".scores");
    // Pre-norm blocks (a block's first op its norm), patches that tile the image, one token each
    // and the class token, attention without the causal mask: what the module computes.
    const bool pre_norm =
        m.layers.size() > 2 && m.layers[1].num_ops > 0 &&
        m.ops[static_cast<std::size_t>(m.layers[1].first_op)].kind == model::OpKind::layernorm;
    if (!patch || !qkv || !scores || scores->compute.causal || !pre_norm || side <= 0 ||
        patch->compute.stride != side || m.image_size <= 0 || m.hidden <= 0 || m.heads <= 0 ||
        m.head_dim <= 0 || m.image_size % side != 0 || patch->gemm.k % (side * side) != 0 ||
        m.seq_len != (m.image_size / side) * (m.image_size / side) + 1)
      return Error{fmt::format(
          "--model: {}: expected a ViT of pre-norm attention blocks without the causal mask and a "
          "patch embedding whose patches tile the image",
          m.name)};
    DecoderShape d = block_shape(m, *qkv);
    d.causal = false;
    VitShape v;
    v.patch = side;
    v.channels = patch->gemm.k / (side * side);
    v.image = m.image_size;
    v.classes = m.num_classes;
    mod = std::make_shared<VisionTransformer>(d, v);
  } else if (bert_module(m)) {
    const model::Op* pos = find_op(m, "embedding.position");
    DecoderShape d = block_shape(m, *find_suffix(m, ".qkv"));
    d.causal = false;
    d.pre_norm = false;
    BertShape b;
    b.vocab = m.vocab;
    b.type_vocab = pos->params / m.hidden - m.seq_len;
    mod = std::make_shared<Bert>(d, b);
  } else if (m.family == model::Family::cnn) {
    // The ResNet module, else the op graph layer by layer.
    if (auto resnet = build_resnet_module(m))
      mod = *resnet;
    else if (auto chain = check_layer_chain(m); !chain)
      return chain.error();
    else
      mod = build_op_graph_module(m);
  } else {
    return executable_family(m).error();
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
        "this variant is not executed yet",
        m.name, have, want)};
  return mod;
}

}  // namespace hetplan::runtime::detail
