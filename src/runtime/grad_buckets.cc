#include "grad_buckets.h"

#include <utility>

#include "hetplan/sim/gradient_buckets.h"

namespace hetplan::runtime::detail {

torch::Tensor flatten(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> parts;
  for (const auto& t : tensors) parts.push_back(t.reshape({-1}));
  return torch::cat(parts);
}

void unflatten_into(const torch::Tensor& flat, const std::vector<torch::Tensor>& tensors) {
  std::int64_t at = 0;
  for (const auto& t : tensors) {
    t.copy_(flat.slice(0, at, at + t.numel()).view_as(t));
    at += t.numel();
  }
}

std::vector<torch::Tensor> grads_of(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> out;
  for (const auto& t : params) out.push_back(t.grad());
  return out;
}

struct GradBuckets::State {
  struct Bucket {
    std::vector<torch::Tensor> params;
    std::vector<torch::Tensor> sums;  // per parameter, once its gradient arrived in the pass
    std::vector<bool> arrived;        // (sums are dropped once the bucket starts)
    int waiting = 0;                  // parameters whose gradient has not arrived
    std::vector<torch::Tensor> flat;  // what is all-reduced
    c10::intrusive_ptr<c10d::Work> work;
  };
  std::vector<Bucket> buckets;
  std::size_t next = 0;  // the first bucket not started: they start in order, on every rank alike
  c10::intrusive_ptr<Collectives> group;
  bool active = false;
  int overlapped = 0;

  // Starts the buckets from `next` on whose gradients have all arrived. In order: Gloo matches
  // the ranks' collectives by the order they are issued.
  void start_ready() {
    for (; next < buckets.size() && buckets[next].waiting == 0; ++next) {
      Bucket& b = buckets[next];
      b.flat = {flatten(b.sums)};
      b.sums.assign(b.sums.size(), torch::Tensor());  // (the flat copy holds them)
      b.work = group->allreduce(b.flat);
    }
  }
  void reset() {
    for (Bucket& b : buckets) {
      b.sums.assign(b.params.size(), torch::Tensor());
      b.arrived.assign(b.params.size(), false);
      b.waiting = static_cast<int>(b.params.size());
      b.flat.clear();
      b.work.reset();
    }
    next = 0;
  }
};

GradBuckets::GradBuckets(const std::vector<std::vector<torch::Tensor>>& layers,
                         const std::vector<double>& layer_bytes, double bucket_bytes,
                         c10::intrusive_ptr<Collectives> group, Accumulated accumulated)
    : state_(std::make_shared<State>()) {
  if (!accumulated) accumulated = [](const torch::Tensor& p) { return p.grad(); };
  state_->group = std::move(group);
  for (const auto& [first, count] : sim::gradient_buckets(layer_bytes, bucket_bytes)) {
    State::Bucket bucket;
    for (int l = first; l < first + count; ++l)
      for (const auto& p : layers[static_cast<std::size_t>(l)]) bucket.params.push_back(p);
    // Layers without parameters hold no gradient: a bucket of only such layers is none.
    if (!bucket.params.empty()) state_->buckets.push_back(std::move(bucket));
  }
  state_->reset();
  // The hooks hold the state weakly: the parameters outlive nothing of it.
  const std::weak_ptr<State> weak = state_;
  for (std::size_t b = 0; b < state_->buckets.size(); ++b)
    for (std::size_t i = 0; i < state_->buckets[b].params.size(); ++i) {
      torch::Tensor p = state_->buckets[b].params[i];
      p.register_hook([weak, b, i, accumulated](const torch::Tensor& grad) {
        auto s = weak.lock();
        if (!s || !s->active) return;
        State::Bucket& bucket = s->buckets[b];
        // A second gradient in one pass (a parameter accumulated twice, as a nested backward of
        // a recomputed segment that shares it could) would be missing from a bucket already
        // started: refuse rather than sum wrongly.
        TORCH_CHECK(!bucket.arrived[i],
                    "gradient buckets: a parameter's gradient arrived twice in one backward pass");
        bucket.arrived[i] = true;
        const torch::Tensor before = accumulated(bucket.params[i]);
        bucket.sums[i] = before.defined() ? before + grad
                                          : grad.to(torch::kFloat, /*non_blocking=*/false,
                                                    /*copy=*/true);
        if (--bucket.waiting == 0) s->start_ready();
      });
    }
}

GradBuckets::~GradBuckets() = default;

void GradBuckets::set_active(bool active) { state_->active = active; }

int GradBuckets::count() const { return static_cast<int>(state_->buckets.size()); }

int GradBuckets::overlapped() const { return state_->overlapped; }

void GradBuckets::finish(std::chrono::milliseconds timeout) {
  state_->active = false;
  state_->overlapped = static_cast<int>(state_->next);
  for (std::size_t k = state_->next; k < state_->buckets.size(); ++k) {
    State::Bucket& b = state_->buckets[k];
    for (std::size_t i = 0; i < b.params.size(); ++i)
      if (!b.sums[i].defined()) b.sums[i] = b.params[i].grad();
    b.waiting = 0;
  }
  state_->start_ready();
  for (State::Bucket& b : state_->buckets) {
    b.work->wait(timeout);
    std::vector<torch::Tensor> grads;
    for (const auto& p : b.params) grads.push_back(p.grad());
    unflatten_into(b.flat[0], grads);
  }
  state_->reset();
}

}  // namespace hetplan::runtime::detail
