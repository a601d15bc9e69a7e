#include "zero_slice.h"

namespace hetplan::runtime::detail {

torch::Tensor gather_slices(Collectives& group, int n, const ZeroSlice& s,
                            const torch::Tensor& owned, std::chrono::milliseconds timeout) {
  torch::Tensor out = torch::empty({n * s.size}, owned.options());
  gather_slices_into(group, n, s, owned, out, timeout);
  return out;
}

void gather_slices_into(Collectives& group, int n, const ZeroSlice& s, const torch::Tensor& owned,
                        const torch::Tensor& out, std::chrono::milliseconds timeout) {
  std::vector<std::vector<torch::Tensor>> parts(1);
  for (int i = 0; i < n; ++i) parts[0].push_back(out.slice(0, i * s.size, (i + 1) * s.size));
  std::vector<torch::Tensor> in{torch::zeros({s.size}, owned.options())};
  in[0].slice(0, 0, s.end - s.begin).copy_(owned.detach());
  group.allgather(parts, in)->wait(timeout);
}

}  // namespace hetplan::runtime::detail
