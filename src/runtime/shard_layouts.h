// Internal to the runtime: which slices of its whole weights a tensor-parallel rank keeps, so that
// gradients of replicas that split a layer differently (other degrees or shares) can be summed in
// the whole layout and cut back into each rank's slices.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "collectives.h"

namespace hetplan::runtime::detail {

using Ranges = std::vector<std::pair<std::int64_t, std::int64_t>>;

// Slices [begin, end) of dimension `dim` of a whole tensor `whole` long there, kept in order.
struct SliceLayout {
  int dim = 0;
  std::int64_t whole = 0;
  Ranges ranges;
};

class ShardLayouts {
 public:
  // Replaces t's data by its slices `ranges` along `dim`, concatenated, and records them.
  void keep(torch::Tensor& t, int dim, const Ranges& ranges);
  // Records that t holds `layout`'s slices of a whole tensor (cut by the caller).
  void record(const torch::Tensor& t, SliceLayout layout) { kept_[key(t)] = std::move(layout); }
  // Records for `copy` the slices recorded for `of` (a copy of a sharded weight).
  void same_as(const torch::Tensor& of, const torch::Tensor& copy);
  // Whether t holds slices of a whole tensor.
  bool split(const torch::Tensor& t) const { return kept_.count(key(t)) > 0; }
  // The size of t's whole tensor along `dim` (t's own where t is whole).
  std::int64_t whole_size(const torch::Tensor& t, int dim) const {
    const auto it = kept_.find(key(t));
    return it != kept_.end() && it->second.dim == dim ? it->second.whole : t.size(dim);
  }
  // `part` (shaped as t) placed in a tensor of t's whole shape, zeros elsewhere; `part` itself
  // when t is whole.
  torch::Tensor to_whole(const torch::Tensor& t, const torch::Tensor& part) const;
  // t's slices of `whole` (shaped as t's whole), concatenated; `whole` itself when t is whole.
  torch::Tensor to_part(const torch::Tensor& t, const torch::Tensor& whole) const;

 private:
  static const void* key(const torch::Tensor& t) { return t.unsafeGetTensorImpl(); }
  std::unordered_map<const void*, SliceLayout> kept_;
};

// Sums `tensors` over `pg` in one flat all-reduce and writes the sums back. (A timeout of 0 waits
// without one, as c10d's kNoTimeout.)
void all_reduce_flat(Collectives& pg, const std::vector<torch::Tensor>& tensors,
                     std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

// Sums `tensors` over `pg` on its rank `server`, which sends the sums back (a parameter server:
// one flat reduce, then a broadcast), and writes the sums back.
void serve_flat(Collectives& pg, const std::vector<torch::Tensor>& tensors, int server,
                std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

// Sums `tensors` over `pg` on several parameter servers (their ranks in pg, distinct), each the
// sum of its slice of the flattened tensors (the i-th server in rank order: elements [N i / S,
// N (i + 1) / S)), and writes the sums back: every rank sends each server its slice and each
// server sends its sum to every rank, two all-to-alls whatever the number of servers.
void serve_slices_flat(Collectives& pg, const std::vector<torch::Tensor>& tensors,
                       const std::vector<int>& servers,
                       std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

// The sums over `pg` of `values` (one per parameter, shaped as it) in the whole layout: each
// rank's slices are placed in tensors of the whole shape (zeros elsewhere) and summed in one flat
// all-reduce. A rank gives its values of split parameters when `give_split`, and of whole ones
// when `give_whole` (one rank per replica, as every tensor-parallel rank holds the same);
// otherwise zeros. With a `server` (its rank in pg), summed there and sent back (serve_flat).
std::vector<torch::Tensor> whole_sums(
    Collectives& pg, const ShardLayouts& layouts, const std::vector<torch::Tensor>& params,
    const std::vector<torch::Tensor>& values, bool give_split, bool give_whole,
    std::chrono::milliseconds timeout = std::chrono::milliseconds(0), int server = -1);

// Sums the gradients of `params` over `pg` in the whole layout (whole_sums, on `server` if one is
// given) and writes each rank's slices of the sums back.
void all_reduce_whole(Collectives& pg, const ShardLayouts& layouts,
                      const std::vector<torch::Tensor>& params, bool give_split, bool give_whole,
                      std::chrono::milliseconds timeout = std::chrono::milliseconds(0),
                      int server = -1);

}  // namespace hetplan::runtime::detail
