#include "zero_params.h"

#include <c10/core/DeviceGuard.h>
#include <c10/core/StorageImpl.h>

#include <utility>

#include "grad_buckets.h"

namespace hetplan::runtime::detail {
namespace {

// The storage a part's weights share (share_storage), or null for a part without weights.
c10::StorageImpl* storage_of(const ZeroPart& part, const std::vector<torch::Tensor>& params) {
  return part.index.empty() ? nullptr : params[part.index.front()].storage().unsafeGetStorageImpl();
}

// A tensor of its own over the storage's first n elements: what is written through it moves no
// weight's version counter.
torch::Tensor alias_of(const torch::Tensor& weight, std::int64_t n) {
  torch::Tensor alias = torch::empty({0}, weight.options());
  alias.set_(weight.storage(), 0, {n}, {1});
  return alias;
}

// The elements a part's storage holds: every member's slice, or this rank's own weights.
std::int64_t storage_elements(const ZeroPart& part, const std::vector<torch::Tensor>& params, int n,
                              const WholeLayout& layout) {
  if (!layout.active()) return n * part.slice.size;
  std::int64_t own = 0;
  for (std::size_t i : part.index) own += params[i].numel();
  return own;
}

}  // namespace

ZeroPart::ZeroPart(const std::vector<torch::Tensor>& tensors, std::vector<std::size_t> which, int n,
                   int k)
    : index(std::move(which)) {
  torch::NoGradGuard no_grad;
  const torch::Tensor flat = !index.empty()    ? flatten(of(tensors))
                             : tensors.empty() ? torch::empty({0})
                                               : torch::empty({0}, tensors.front().options());
  numel = flat.numel();
  slice = ZeroSlice(numel, n, k);
  owned = flat.slice(0, slice.begin, slice.end).clone();
}

std::vector<torch::Tensor> ZeroPart::of(const std::vector<torch::Tensor>& tensors) const {
  std::vector<torch::Tensor> out;
  out.reserve(index.size());
  for (std::size_t i : index) out.push_back(tensors[i]);
  return out;
}

void share_storage(const ZeroPart& part, const std::vector<torch::Tensor>& params, int n,
                   const WholeLayout& layout) {
  if (part.index.empty()) return;
  torch::NoGradGuard no_grad;
  const std::vector<torch::Tensor> weights = part.of(params);
  torch::Tensor flat =
      torch::zeros({storage_elements(part, params, n, layout)}, weights.front().options());
  std::int64_t at = 0;
  for (const auto& w : weights) {
    flat.slice(0, at, at + w.numel()).copy_(w.detach().reshape({-1}));
    w.set_data(flat.slice(0, at, at + w.numel()).view(w.sizes()));
    at += w.numel();
  }
}

void release_part(const ZeroPart& part, const std::vector<torch::Tensor>& params) {
  c10::StorageImpl* s = storage_of(part, params);
  if (s == nullptr) return;
  // (A device's allocator allocates on the current device: the weights'.)
  const c10::DeviceGuard on(params[part.index.front()].device());
  s->set_data_ptr_noswap(s->allocator()->allocate(0));
  s->set_nbytes(0);
}

void gather_part(Collectives& group, int n, const ZeroPart& part,
                 const std::vector<torch::Tensor>& params, std::chrono::milliseconds timeout,
                 const WholeLayout& layout) {
  c10::StorageImpl* s = storage_of(part, params);
  if (s == nullptr) return;  // (alike on every member: their parts have the same weights)
  const torch::Tensor& weight = params[part.index.front()];
  const c10::DeviceGuard on(weight.device());
  const std::int64_t elements = storage_elements(part, params, n, layout);
  const auto bytes = static_cast<std::size_t>(elements) * weight.element_size();
  s->set_data_ptr_noswap(s->allocator()->allocate(bytes));
  s->set_nbytes(bytes);
  if (!layout.active()) {
    gather_slices_into(group, n, part.slice, part.owned, alias_of(weight, elements), timeout);
    return;
  }
  // The whole weights for a moment, and this rank's parts of them written into its storage, in
  // the weights' order (share_storage's), through an alias as above.
  const torch::Tensor whole = gather_slices(group, n, part.slice, part.owned, timeout);
  const torch::Tensor own = alias_of(weight, elements);
  torch::NoGradGuard no_grad;
  std::int64_t at = 0, mine = 0;
  for (std::size_t i : part.index) {
    const torch::Tensor& w = params[i];
    const torch::Tensor& shape = (*layout.whole)[i];
    own.slice(0, mine, mine + w.numel())
        .copy_(
            layout.layouts->to_part(w, whole.slice(0, at, at + shape.numel()).view(shape.sizes()))
                .reshape({-1}));
    at += shape.numel();
    mine += w.numel();
  }
}

WholeWeights::WholeWeights(Collectives& group, int n, const ZeroPart& part,
                           const std::vector<torch::Tensor>& params,
                           std::chrono::milliseconds timeout, const WholeLayout& layout)
    : part_(&part), params_(&params) {
  gather_part(group, n, part, params, timeout, layout);
}

WholeWeights::~WholeWeights() {
  if (part_ != nullptr) release_part(*part_, *params_);
}

WholeWeights::WholeWeights(WholeWeights&& other) noexcept
    : part_(std::exchange(other.part_, nullptr)), params_(other.params_) {}

}  // namespace hetplan::runtime::detail
