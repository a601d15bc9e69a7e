// Internal to the runtime: ZeRO-1's slices of a flattened set of weights. Each of n members keeps
// Adam's states for one slice and steps it (Adam is elementwise, so the sliced steps equal the
// whole one); the updated slices are then all-gathered.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstdint>

#include "collectives.h"

namespace hetplan::runtime::detail {

// Member k's slice [begin, end) of `numel` flattened elements split over n members in slices of
// `size` = ceil(numel / n) (the last ones short or empty).
struct ZeroSlice {
  std::int64_t size = 0, begin = 0, end = 0;
  ZeroSlice() = default;
  ZeroSlice(std::int64_t numel, std::int64_t n, std::int64_t k)
      : size((numel + n - 1) / n),
        begin(std::min(numel, size * k)),
        end(std::min(numel, begin + size)) {}
};

// Every member's updated slice (this member's is `owned`), gathered over `group` of n members and
// padded to one size as Gloo's all-gather needs: n * s.size elements, the flattened weights first.
torch::Tensor gather_slices(Collectives& group, int n, const ZeroSlice& s,
                            const torch::Tensor& owned, std::chrono::milliseconds timeout);
// The same gathered into `out` (n * s.size elements, written in place).
void gather_slices_into(Collectives& group, int n, const ZeroSlice& s, const torch::Tensor& owned,
                        const torch::Tensor& out, std::chrono::milliseconds timeout);

}  // namespace hetplan::runtime::detail
