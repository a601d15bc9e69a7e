#include "zero_slice.h"

namespace hetplan::runtime::detail {

torch::Tensor gather_slices(Collectives& group, int n, const ZeroSlice& s,
                            const torch::Tensor& owned, std::chrono::milliseconds timeout) {
  std::vector<std::vector<torch::Tensor>> out(1);
  for (int i = 0; i < n; ++i) out[0].push_back(torch::empty({s.size}, owned.options()));
  std::vector<torch::Tensor> in{torch::zeros({s.size}, owned.options())};
  in[0].slice(0, 0, s.end - s.begin).copy_(owned.detach());
  group.allgather(out, in)->wait(timeout);
  return torch::cat(out[0]);
}

void reduce_to_slices(Collectives& group, int n, int k, torch::Tensor& flat,
                      std::chrono::milliseconds timeout) {
  for (int owner = 0; owner < n; ++owner) {
    const ZeroSlice s(flat.numel(), n, owner);
    if (s.end <= s.begin) continue;  // (alike on every member)
    std::vector<torch::Tensor> part{flat.slice(0, s.begin, s.end).clone()};
    c10d::ReduceOptions ro;
    ro.rootRank = owner;
    group.reduce(part, ro)->wait(timeout);
    if (owner == k) flat.slice(0, s.begin, s.end).copy_(part[0]);
  }
}

}  // namespace hetplan::runtime::detail
