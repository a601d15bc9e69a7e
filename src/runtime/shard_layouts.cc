#include "shard_layouts.h"

#include <algorithm>

#include "grad_buckets.h"

namespace hetplan::runtime::detail {

void ShardLayouts::keep(torch::Tensor& t, int dim, const Ranges& ranges) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> parts;
  for (auto [b, e] : ranges) parts.push_back(t.slice(dim, b, e));
  kept_[key(t)] = SliceLayout{dim, t.size(dim), ranges};
  t.set_data(torch::cat(parts, dim).clone());
}

void ShardLayouts::same_as(const torch::Tensor& of, const torch::Tensor& copy) {
  if (auto it = kept_.find(key(of)); it != kept_.end()) {
    const SliceLayout layout = it->second;  // copied first: the insertion may rehash
    kept_[key(copy)] = layout;
  }
}

torch::Tensor ShardLayouts::to_whole(const torch::Tensor& t, const torch::Tensor& part) const {
  const auto it = kept_.find(key(t));
  if (it == kept_.end()) return part;
  const SliceLayout& s = it->second;
  std::vector<std::int64_t> shape = part.sizes().vec();
  shape[s.dim] = s.whole;
  torch::Tensor whole = torch::zeros(shape, part.options());
  std::int64_t at = 0;
  for (auto [b, e] : s.ranges) {
    whole.slice(s.dim, b, e).copy_(part.slice(s.dim, at, at + e - b));
    at += e - b;
  }
  return whole;
}

torch::Tensor ShardLayouts::to_part(const torch::Tensor& t, const torch::Tensor& whole) const {
  const auto it = kept_.find(key(t));
  if (it == kept_.end()) return whole;
  const SliceLayout& s = it->second;
  std::vector<torch::Tensor> parts;
  for (auto [b, e] : s.ranges) parts.push_back(whole.slice(s.dim, b, e));
  return torch::cat(parts, s.dim);
}

void all_reduce_flat(Collectives& pg, const std::vector<torch::Tensor>& tensors,
                     std::chrono::milliseconds timeout) {
  std::vector<torch::Tensor> flat{flatten(tensors)};
  pg.allreduce(flat)->wait(timeout);
  unflatten_into(flat[0], tensors);
}

void serve_flat(Collectives& pg, const std::vector<torch::Tensor>& tensors, int server,
                std::chrono::milliseconds timeout) {
  std::vector<torch::Tensor> flat{flatten(tensors)};
  c10d::ReduceOptions ro;
  ro.rootRank = server;
  pg.reduce(flat, ro)->wait(timeout);
  c10d::BroadcastOptions bo;
  bo.rootRank = server;
  pg.broadcast(flat, bo)->wait(timeout);
  unflatten_into(flat[0], tensors);
}

void serve_slices_flat(Collectives& pg, const std::vector<torch::Tensor>& tensors,
                       const std::vector<int>& servers, std::chrono::milliseconds timeout) {
  const torch::Tensor flat = flatten(tensors);
  const std::int64_t N = flat.numel(), S = static_cast<std::int64_t>(servers.size());
  const int n = pg.getSize(), me = pg.getRank();
  // The servers' slices in rank order, so that the flattened tensors are what every rank sends
  // and where the sums arrive, without copies: each server's length by rank (0 for the others).
  std::vector<int> ranked = servers;
  std::sort(ranked.begin(), ranked.end());
  std::vector<std::int64_t> slices(static_cast<std::size_t>(n), 0);
  for (std::int64_t i = 0; i < S; ++i)
    slices[static_cast<std::size_t>(ranked[static_cast<std::size_t>(i)])] =
        N * (i + 1) / S - N * i / S;
  const std::int64_t my_len = slices[static_cast<std::size_t>(me)];
  const std::vector<std::int64_t> mine_each(static_cast<std::size_t>(n), my_len);
  c10d::AllToAllOptions opts;
  // Push: to each server its slice. (c10d takes the split sizes by reference and moves from them:
  // each call gets copies.)
  torch::Tensor got = torch::empty({n * my_len}, flat.options());
  {
    torch::Tensor in = flat;
    std::vector<std::int64_t> out_sizes = mine_each, in_sizes = slices;
    pg.alltoall_base(got, in, out_sizes, in_sizes, opts)->wait(timeout);
  }
  // Pull: each server's sum to every rank, into place.
  {
    torch::Tensor in = got.view({n, my_len}).sum(0).repeat({n}), out = flat;
    std::vector<std::int64_t> out_sizes = slices, in_sizes = mine_each;
    pg.alltoall_base(out, in, out_sizes, in_sizes, opts)->wait(timeout);
  }
  unflatten_into(flat, tensors);
}

std::vector<torch::Tensor> whole_sums(Collectives& pg, const ShardLayouts& layouts,
                                      const std::vector<torch::Tensor>& params,
                                      const std::vector<torch::Tensor>& values, bool give_split,
                                      bool give_whole, std::chrono::milliseconds timeout,
                                      int server) {
  std::vector<torch::Tensor> wholes;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const bool give = layouts.split(params[i]) ? give_split : give_whole;
    wholes.push_back(layouts.to_whole(
        params[i], give ? values[i].detach().clone() : torch::zeros_like(values[i])));
  }
  if (server >= 0)
    serve_flat(pg, wholes, server, timeout);
  else
    all_reduce_flat(pg, wholes, timeout);
  return wholes;
}

void all_reduce_whole(Collectives& pg, const ShardLayouts& layouts,
                      const std::vector<torch::Tensor>& params, bool give_split, bool give_whole,
                      std::chrono::milliseconds timeout, int server) {
  const auto wholes =
      whole_sums(pg, layouts, params, grads_of(params), give_split, give_whole, timeout, server);
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < params.size(); ++i)
    params[i].mutable_grad().copy_(layouts.to_part(params[i], wholes[i]));
}

}  // namespace hetplan::runtime::detail
