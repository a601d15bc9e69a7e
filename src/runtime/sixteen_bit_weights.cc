#include "sixteen_bit_weights.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <unordered_map>
#include <utility>

namespace hetplan::runtime::detail {

std::vector<std::size_t> autocast_weights(torch::nn::Module& module,
                                          const std::vector<torch::Tensor>& params) {
  std::unordered_map<const void*, std::size_t> index;
  for (std::size_t i = 0; i < params.size(); ++i) index.emplace(params[i].unsafeGetTensorImpl(), i);
  std::vector<std::size_t> out;
  for (const auto& sub : module.modules(/*include_self=*/true)) {
    if (sub->as<torch::nn::Linear>() == nullptr && sub->as<torch::nn::Conv2d>() == nullptr)
      continue;
    const torch::Tensor* weight = sub->named_parameters(/*recurse=*/false).find("weight");
    if (weight == nullptr) continue;
    if (const auto it = index.find(weight->unsafeGetTensorImpl()); it != index.end())
      out.push_back(it->second);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

struct SixteenBitWeights::State {
  std::vector<torch::Tensor> params;                                 // the ones held in 16 bits
  std::vector<torch::Tensor> sums;                                   // their fp32 gradients so far
  std::vector<torch::Tensor> held;  // their 16-bit values while fp32 stand-ins take their place
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;  // kept: they hold the hooks
  std::unordered_map<const void*, std::size_t> index;
};

namespace {

// After a weight's accumulation: its gradient added into the fp32 sum, and freed.
class IntoSum : public torch::autograd::FunctionPostHook {
 public:
  IntoSum(std::weak_ptr<SixteenBitWeights::State> state, std::size_t i)
      : state_(std::move(state)), i_(i) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    auto s = state_.lock();
    if (!s) return outputs;
    torch::Tensor& param = s->params[i_];
    const torch::Tensor g = param.grad();
    if (g.defined()) {
      torch::NoGradGuard no_grad;
      torch::Tensor& sum = s->sums[i_];
      if (sum.defined())
        sum.add_(g);
      else
        sum = g.to(torch::kFloat);
      param.mutable_grad() = torch::Tensor();
    }
    return outputs;
  }

 private:
  std::weak_ptr<SixteenBitWeights::State> state_;
  std::size_t i_;
};

}  // namespace

SixteenBitWeights::SixteenBitWeights(const std::vector<torch::Tensor>& params,
                                     std::vector<std::size_t> which, at::ScalarType dtype,
                                     bool sum_gradients)
    : state_(std::make_shared<State>()) {
  torch::NoGradGuard no_grad;
  for (std::size_t i : which) {
    torch::Tensor p = params[i];
    p.set_data(p.detach().to(dtype));
    state_->index.emplace(p.unsafeGetTensorImpl(), state_->params.size());
    state_->params.push_back(p);
  }
  state_->sums.resize(state_->params.size());
  state_->held.resize(state_->params.size());
  const std::weak_ptr<State> weak = state_;
  for (std::size_t i = 0; i < state_->params.size(); ++i) {
    auto acc = torch::autograd::impl::grad_accumulator(state_->params[i]);
    if (sum_gradients) acc->add_post_hook(std::make_unique<IntoSum>(weak, i));
    state_->accumulators.push_back(std::move(acc));
  }
}

SixteenBitWeights::~SixteenBitWeights() = default;

bool SixteenBitWeights::empty() const { return state_->params.empty(); }

bool SixteenBitWeights::holds(const torch::Tensor& param) const {
  return state_->index.count(param.unsafeGetTensorImpl()) > 0;
}

torch::Tensor SixteenBitWeights::accumulated(const torch::Tensor& param) const {
  const auto it = state_->index.find(param.unsafeGetTensorImpl());
  return it == state_->index.end() ? param.grad() : state_->sums[it->second];
}

void SixteenBitWeights::lend_gradients() {
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < state_->params.size(); ++i) {
    torch::Tensor& p = state_->params[i];
    const torch::Tensor nothing =
        torch::zeros({1}, p.options().dtype(torch::kFloat)).expand(p.sizes());
    // (Its accumulator is dropped with the dtype; restore() puts it back. Its 16-bit storage is
    // kept, not freed and made again each step.)
    state_->held[i] = p.detach();
    p.set_data(nothing);
    p.mutable_grad() = std::exchange(state_->sums[i], torch::Tensor());
  }
}

void SixteenBitWeights::restore() {
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < state_->params.size(); ++i) {
    torch::Tensor& p = state_->params[i];
    p.mutable_grad() = torch::Tensor();
    p.set_data(std::exchange(state_->held[i], torch::Tensor()));
    // Its accumulator again, with the hooks on it (this one's, and any registered since).
    torch::autograd::impl::set_grad_accumulator(p, state_->accumulators[i]);
  }
}

}  // namespace hetplan::runtime::detail
