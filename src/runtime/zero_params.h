// Internal to the runtime: ZeRO's parts and ZeRO-3's parameters. A part is a set of weights ZeRO
// shards over n members as one flattened tensor, of which each member keeps a slice (ZeroSlice)
// and steps it. Under ZeRO-3 the weights of a part are kept between the passes that use them only
// as that slice: each pass gathers them whole first and releases them after. As FSDP does, the
// weights are views of one flat storage, which the gather writes directly and the release frees:
// they keep their shapes, and what autograd saved of them in a forward pass (a weight, or a view
// of it) reads the values gathered again for the backward pass.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "collectives.h"
#include "shard_layouts.h"
#include "zero_slice.h"

namespace hetplan::runtime::detail {

struct ZeroPart {
  std::vector<std::size_t> index;  // its weights: indices into the tensors it was cut from
  std::int64_t numel = 0;          // of their flattened elements
  ZeroSlice slice;                 // this member's
  torch::Tensor owned;             // the slice's values (the optimizer's parameter)

  ZeroPart() = default;
  // Member k's of n of tensors[index...] (their current values).
  ZeroPart(const std::vector<torch::Tensor>& tensors, std::vector<std::size_t> index, int n, int k);
  // Its weights among `tensors` (the ones it was cut from, or tensors laid out alike).
  std::vector<torch::Tensor> of(const std::vector<torch::Tensor>& tensors) const;
};

// Where a part's weights are the stage's in the whole layout (ZeRO over replicas that split their
// layers unlike, and batch programs): `whole` holds each weight's whole shape (its values are not
// read) and `layouts` which slices of it this rank keeps. Inactive: the part's weights are this
// rank's own, alike on every member.
struct WholeLayout {
  const ShardLayouts* layouts = nullptr;
  const std::vector<torch::Tensor>* whole = nullptr;
  bool active() const { return layouts != nullptr; }
};

// ZeRO-3: makes the weights of `part` among `params` views of one storage of n * slice.size
// elements (their flattened values, then padding), keeping their values; under an active `layout`
// of their own elements only (the part's slices are of the whole weights). A weight must be in one
// part only.
void share_storage(const ZeroPart& part, const std::vector<torch::Tensor>& params, int n,
                   const WholeLayout& layout = {});
// Frees that storage (the weights keep their shapes; their values must not be read until
// gathered), or writes every member's slice into it over `group`. Neither counts as an in-place
// change of the weights: autograd's saved values are these.
void release_part(const ZeroPart& part, const std::vector<torch::Tensor>& params);
// (Under an active `layout`, every member's slice of the whole weights is gathered and this rank's
// parts of them written into its storage.)
void gather_part(Collectives& group, int n, const ZeroPart& part,
                 const std::vector<torch::Tensor>& params, std::chrono::milliseconds timeout,
                 const WholeLayout& layout = {});

// While it lives, the weights of a part are whole (gather_part); its end releases them.
class WholeWeights {
 public:
  WholeWeights(Collectives& group, int n, const ZeroPart& part,
               const std::vector<torch::Tensor>& params, std::chrono::milliseconds timeout,
               const WholeLayout& layout = {});
  ~WholeWeights();
  WholeWeights(const WholeWeights&) = delete;
  WholeWeights& operator=(const WholeWeights&) = delete;
  WholeWeights(WholeWeights&& other) noexcept;
  WholeWeights& operator=(WholeWeights&&) = delete;

 private:
  const ZeroPart* part_;
  const std::vector<torch::Tensor>* params_;
};

}  // namespace hetplan::runtime::detail
