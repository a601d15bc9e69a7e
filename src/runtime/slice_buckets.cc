#include "slice_buckets.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <deque>
#include <thread>
#include <utility>

#include "hetplan/sim/gradient_buckets.h"

namespace hetplan::runtime::detail {

struct SliceBuckets::State {
  // A bucket's parameters of one part: consecutive there, elements [lo, hi) of its flattening.
  struct Segment {
    std::size_t part = 0;
    std::int64_t lo = 0, hi = 0;
    std::vector<std::size_t> positions;  // theirs in the bucket
  };
  struct Bucket {
    std::vector<std::size_t> params;  // indices into State::params
    std::vector<Segment> segments;
    std::vector<torch::Tensor> grads;  // this pass's, by position, until the bucket starts
    int waiting = 0;                   // parameters whose gradient has not arrived in this pass
  };
  struct ChunkBuckets {
    std::vector<Bucket> buckets;  // in the order they fill: from the chunk's last layer
    std::size_t next = 0;         // the first not started in this pass (they start in order)
  };
  // A reduce of a bucket's elements to their slice's owner; `at` where they go in its slice.
  struct Reduce {
    torch::Tensor values;
    c10::intrusive_ptr<c10d::Work> work;
    std::size_t part = 0;
    std::int64_t at = 0;
    bool mine = false;
  };

  std::vector<torch::Tensor> params;
  std::vector<ZeroSlice> slices;    // this member's, per part
  std::vector<torch::Tensor> sums;  // of this member's slices, per part (undefined: none yet)
  std::vector<ChunkBuckets> chunks;
  std::deque<std::vector<Reduce>> in_flight;  // per bucket started, oldest first
  c10::intrusive_ptr<Collectives> group;
  int n = 1, k = 0;
  std::chrono::milliseconds timeout{0};
  torch::TensorOptions sum_options;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;  // kept: they hold the hooks

  void arrive(std::size_t c, std::size_t b, std::size_t pos, const torch::Tensor& grad) {
    ChunkBuckets& chunk = chunks[c];
    TORCH_CHECK(b >= chunk.next,
                "ZeRO gradient buckets: a gradient arrived after its bucket started in one "
                "backward pass");
    Bucket& bucket = chunk.buckets[b];
    torch::Tensor& held = bucket.grads[pos];
    if (held.defined()) {
      held = held + grad;  // (a second accumulation within the pass)
      return;
    }
    held = grad;
    if (--bucket.waiting == 0) start_ready(c);
  }

  void start_ready(std::size_t c) {
    ChunkBuckets& chunk = chunks[c];
    for (; chunk.next < chunk.buckets.size() && chunk.buckets[chunk.next].waiting == 0;
         ++chunk.next)
      start(chunk.buckets[chunk.next]);
  }

  void start(Bucket& bucket) {
    torch::NoGradGuard no_grad;
    std::vector<Reduce> reduces;
    for (const Segment& seg : bucket.segments) {
      std::vector<torch::Tensor> pieces;
      for (std::size_t pos : seg.positions)
        pieces.push_back(bucket.grads[pos].reshape({-1}).to(torch::kFloat));
      const torch::Tensor flat = torch::cat(pieces);
      pieces.clear();  // (the gradients go as soon as their copy is made)
      for (std::size_t pos : seg.positions) bucket.grads[pos] = torch::Tensor();
      const std::int64_t size = slices[seg.part].size;
      for (std::int64_t owner = seg.lo / size; owner * size < seg.hi; ++owner) {
        const std::int64_t lo = std::max(seg.lo, owner * size);
        const std::int64_t hi = std::min(seg.hi, (owner + 1) * size);
        Reduce r;
        r.values = flat.slice(0, lo - seg.lo, hi - seg.lo);  // (a view: Gloo reads its offset)
        std::vector<torch::Tensor> tensors{r.values};
        c10d::ReduceOptions options;
        options.rootRank = owner;
        r.work = group->reduce(tensors, options);
        r.part = seg.part;
        r.at = lo - owner * size;
        r.mine = owner == k;
        reduces.push_back(std::move(r));
      }
    }
    bucket.grads.assign(bucket.grads.size(), torch::Tensor());
    in_flight.push_back(std::move(reduces));
    // The oldest buckets' sums, as they come (and no more than kInFlight buckets held).
    while (!in_flight.empty() && std::all_of(in_flight.front().begin(), in_flight.front().end(),
                                             [](const Reduce& r) { return r.work->isCompleted(); }))
      land_oldest();
    while (in_flight.size() > static_cast<std::size_t>(kInFlight)) land_oldest();
  }

  void land_oldest() {
    torch::NoGradGuard no_grad;
    for (Reduce& r : in_flight.front()) {
      r.work->wait(timeout);
      // Gloo's worker lets go of the work (and so of the bucket's values) just after it completes:
      // wait for that, briefly, so that the values are freed here, where the memory probe sees it
      // (run.cc's step peak), not on Gloo's thread.
      for (int spins = 0; r.work.use_count() > 1 && spins < 10000; ++spins)
        std::this_thread::yield();
      if (!r.mine) continue;
      torch::Tensor& sum = sums[r.part];
      if (!sum.defined())
        sum = torch::zeros({slices[r.part].end - slices[r.part].begin}, sum_options);
      sum.slice(0, r.at, r.at + r.values.numel()).add_(r.values);
    }
    in_flight.pop_front();
  }
};

namespace {

// After a parameter's accumulation: its gradient taken into its bucket, and freed from it.
class IntoBucket : public torch::autograd::FunctionPostHook {
 public:
  IntoBucket(std::weak_ptr<SliceBuckets::State> state, std::size_t param, std::size_t chunk,
             std::size_t bucket, std::size_t pos)
      : state_(std::move(state)), param_(param), chunk_(chunk), bucket_(bucket), pos_(pos) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    auto s = state_.lock();
    if (!s) return outputs;
    torch::Tensor& p = s->params[param_];
    const torch::Tensor g = p.grad();
    if (!g.defined()) return outputs;
    p.mutable_grad() = torch::Tensor();
    s->arrive(chunk_, bucket_, pos_, g);
    return outputs;
  }

 private:
  std::weak_ptr<SliceBuckets::State> state_;
  std::size_t param_, chunk_, bucket_, pos_;
};

}  // namespace

SliceBuckets::SliceBuckets(const std::vector<torch::Tensor>& params,
                           const std::vector<ZeroPart>& parts, const std::vector<Chunk>& chunks,
                           double bucket_bytes, c10::intrusive_ptr<Collectives> group, int n, int k,
                           std::chrono::milliseconds timeout)
    : state_(std::make_shared<State>()) {
  State& s = *state_;
  s.params = params;
  s.group = std::move(group);
  s.n = n;
  s.k = k;
  s.timeout = timeout;
  s.sum_options = torch::TensorOptions().dtype(torch::kFloat);
  if (!params.empty()) s.sum_options = s.sum_options.device(params.front().device());
  // Each parameter's part, and where its elements start in the part's flattening.
  constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  std::vector<std::size_t> part_of(params.size(), kNone);
  std::vector<std::int64_t> offset_of(params.size(), 0);
  for (std::size_t q = 0; q < parts.size(); ++q) {
    s.slices.push_back(parts[q].slice);
    std::int64_t at = 0;
    for (std::size_t i : parts[q].index) {
      part_of[i] = q;
      offset_of[i] = at;
      at += params[i].numel();
    }
  }
  s.sums.resize(parts.size());
  const std::weak_ptr<State> weak = state_;
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    State::ChunkBuckets chunk;
    for (const auto& [first, count] : sim::gradient_buckets(chunks[c].layer_bytes, bucket_bytes)) {
      State::Bucket bucket;
      for (int l = first; l < first + count; ++l)
        for (std::size_t i : chunks[c].layers[static_cast<std::size_t>(l)]) {
          TORCH_CHECK(part_of[i] != kNone, "ZeRO gradient buckets: a parameter in no part");
          if (bucket.segments.empty() || bucket.segments.back().part != part_of[i] ||
              bucket.segments.back().hi != offset_of[i])
            bucket.segments.push_back({part_of[i], offset_of[i], offset_of[i], {}});
          bucket.segments.back().hi += params[i].numel();
          bucket.segments.back().positions.push_back(bucket.params.size());
          bucket.params.push_back(i);
        }
      if (bucket.params.empty()) continue;  // layers without parameters
      bucket.grads.resize(bucket.params.size());
      bucket.waiting = static_cast<int>(bucket.params.size());
      chunk.buckets.push_back(std::move(bucket));
    }
    s.chunks.push_back(std::move(chunk));
  }
  for (std::size_t c = 0; c < s.chunks.size(); ++c)
    for (std::size_t b = 0; b < s.chunks[c].buckets.size(); ++b)
      for (std::size_t pos = 0; pos < s.chunks[c].buckets[b].params.size(); ++pos) {
        const std::size_t i = s.chunks[c].buckets[b].params[pos];
        auto acc = torch::autograd::impl::grad_accumulator(s.params[i]);
        TORCH_CHECK(acc != nullptr, "ZeRO gradient buckets: a parameter that takes no gradient");
        acc->add_post_hook(std::make_unique<IntoBucket>(weak, i, c, b, pos));
        s.accumulators.push_back(std::move(acc));
      }
}

SliceBuckets::~SliceBuckets() = default;

int SliceBuckets::count() const {
  int out = 0;
  for (const auto& chunk : state_->chunks) out += static_cast<int>(chunk.buckets.size());
  return out;
}

void SliceBuckets::end_pass(std::size_t c) {
  State& s = *state_;
  State::ChunkBuckets& chunk = s.chunks.at(c);
  for (std::size_t b = chunk.next; b < chunk.buckets.size(); ++b) {
    State::Bucket& bucket = chunk.buckets[b];
    for (std::size_t pos = 0; pos < bucket.params.size(); ++pos)
      if (!bucket.grads[pos].defined())
        bucket.grads[pos] = torch::zeros({s.params[bucket.params[pos]].numel()}, s.sum_options);
    bucket.waiting = 0;
  }
  s.start_ready(c);
  chunk.next = 0;
  for (State::Bucket& bucket : chunk.buckets)
    bucket.waiting = static_cast<int>(bucket.params.size());
}

std::vector<torch::Tensor> SliceBuckets::finish() {
  State& s = *state_;
  while (!s.in_flight.empty()) s.land_oldest();
  std::vector<torch::Tensor> out;
  for (std::size_t q = 0; q < s.sums.size(); ++q) {
    torch::Tensor sum = std::exchange(s.sums[q], torch::Tensor());
    if (!sum.defined()) sum = torch::zeros({s.slices[q].end - s.slices[q].begin}, s.sum_options);
    out.push_back(std::move(sum));
  }
  return out;
}

}  // namespace hetplan::runtime::detail
