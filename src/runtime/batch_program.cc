#include "batch_program.h"

namespace hetplan::runtime::detail {

void ShardedWeights::shard(torch::Tensor& p) {
  // A weight smaller than the group leaves some ranks an empty shard.
  Entry e{p.sizes().vec(), share_counts(p.numel(), *group_)};
  std::int64_t begin = 0;
  for (int i = 0; i < group_->rank; ++i) begin += e.counts[i];
  {
    torch::NoGradGuard no_grad;
    p.set_data(p.reshape({-1}).slice(0, begin, begin + e.counts[group_->rank]).clone());
  }
  entries_[p.unsafeGetTensorImpl()] = std::move(e);
}

torch::Tensor ShardedWeights::whole(const torch::Tensor& p) const {
  if (!p.defined()) return p;
  auto it = entries_.find(p.unsafeGetTensorImpl());
  if (it == entries_.end()) return p;
  return gather_shards(p, *group_, 0, it->second.counts).view(it->second.shape);
}

bool ShardedWeights::holds(const torch::Tensor& p) const {
  return p.defined() && entries_.count(p.unsafeGetTensorImpl()) > 0;
}

}  // namespace hetplan::runtime::detail
