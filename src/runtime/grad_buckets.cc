#include "grad_buckets.h"

#include <utility>

namespace hetplan::runtime::detail {
namespace {

torch::Tensor flatten(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> parts;
  for (const auto& t : tensors) parts.push_back(t.reshape({-1}));
  return torch::cat(parts);
}

}  // namespace

struct GradBuckets::State {
  struct Bucket {
    std::vector<torch::Tensor> params;
    std::vector<torch::Tensor> sums;  // per parameter, once its gradient arrived in the pass
    int waiting = 0;                  // parameters whose gradient has not arrived
    std::vector<torch::Tensor> flat;  // what is all-reduced
    c10::intrusive_ptr<c10d::Work> work;
  };
  std::vector<Bucket> buckets;
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  bool active = false;
  int overlapped = 0;

  void launch(Bucket& b) {
    b.flat = {flatten(b.sums)};
    b.work = group->allreduce(b.flat);
  }
  void reset() {
    for (Bucket& b : buckets) {
      b.sums.assign(b.params.size(), torch::Tensor());
      b.waiting = static_cast<int>(b.params.size());
      b.flat.clear();
      b.work.reset();
    }
  }
};

GradBuckets::GradBuckets(const std::vector<std::vector<torch::Tensor>>& layers, double bucket_bytes,
                         c10::intrusive_ptr<c10d::ProcessGroup> group)
    : state_(std::make_shared<State>()) {
  state_->group = std::move(group);
  double held = 0;
  for (std::size_t l = layers.size(); l-- > 0;) {
    if (state_->buckets.empty() || held >= bucket_bytes) {
      state_->buckets.emplace_back();
      held = 0;
    }
    for (const auto& p : layers[l]) {
      state_->buckets.back().params.push_back(p);
      held += static_cast<double>(p.numel() * p.element_size());
    }
  }
  state_->reset();
  // The hooks hold the state weakly: the parameters outlive nothing of it.
  const std::weak_ptr<State> weak = state_;
  for (std::size_t b = 0; b < state_->buckets.size(); ++b)
    for (std::size_t i = 0; i < state_->buckets[b].params.size(); ++i) {
      torch::Tensor p = state_->buckets[b].params[i];
      p.register_hook([weak, b, i](const torch::Tensor& grad) {
        auto s = weak.lock();
        if (!s || !s->active) return;
        State::Bucket& bucket = s->buckets[b];
        if (bucket.sums[i].defined()) return;  // once per pass
        const torch::Tensor& param = bucket.params[i];
        bucket.sums[i] = param.grad().defined() ? param.grad() + grad : grad.clone();
        if (--bucket.waiting == 0) s->launch(bucket);
      });
    }
}

GradBuckets::~GradBuckets() = default;

void GradBuckets::set_active(bool active) { state_->active = active; }

int GradBuckets::count() const { return static_cast<int>(state_->buckets.size()); }

int GradBuckets::overlapped() const { return state_->overlapped; }

void GradBuckets::finish(std::chrono::milliseconds timeout) {
  state_->active = false;
  state_->overlapped = 0;
  for (State::Bucket& b : state_->buckets) {
    if (b.work) {
      ++state_->overlapped;
      continue;
    }
    for (std::size_t i = 0; i < b.params.size(); ++i)
      if (!b.sums[i].defined()) b.sums[i] = b.params[i].grad();
    state_->launch(b);
  }
  for (State::Bucket& b : state_->buckets) {
    b.work->wait(timeout);
    std::int64_t at = 0;
    for (const auto& p : b.params) {
      p.grad().copy_(b.flat[0].slice(0, at, at + p.numel()).view_as(p));
      at += p.numel();
    }
  }
  state_->reset();
}

}  // namespace hetplan::runtime::detail
