#include "sufficient_factors.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace hetplan::runtime::detail {
namespace {

std::int64_t width(FeatureRange r) { return r.second - r.first; }

// Features [want.first, want.second) of replica r's factors, from the holders' columns of one
// kind (`which` picks a holder's range of it; `offset` its first column in what it gave).
template <typename Which, typename Offset>
torch::Tensor cover(const std::vector<torch::Tensor>& given,
                    const std::vector<FactorHolder>& holders, int r, FeatureRange want, Which which,
                    Offset offset) {
  std::vector<torch::Tensor> pieces;
  std::int64_t at = want.first;
  while (at < want.second) {
    std::size_t from = holders.size();
    for (std::size_t i = 0; i < holders.size() && from == holders.size(); ++i) {
      const FeatureRange h = which(holders[i]);
      if (holders[i].replica == r && h.first <= at && at < h.second) from = i;
    }
    if (from == holders.size())
      throw std::logic_error(
          fmt::format("sufficient factors: no holder of replica {} has feature {}", r, at));
    const FactorHolder& h = holders[from];
    const std::int64_t end = std::min(want.second, which(h).second);
    const std::int64_t first = offset(h) + at - which(h).first;
    pieces.push_back(given[from].slice(0, 0, h.rows).slice(1, first, first + end - at));
    at = end;
  }
  if (pieces.size() == 1) return pieces[0];
  return torch::cat(pieces, 1);
}

}  // namespace

std::pair<torch::Tensor, torch::Tensor> replica_factors(const std::vector<torch::Tensor>& given,
                                                        const std::vector<FactorHolder>& holders,
                                                        int r, FeatureRange inputs,
                                                        FeatureRange outputs) {
  auto in_range = [](const FactorHolder& h) { return h.inputs; };
  auto out_range = [](const FactorHolder& h) { return h.outputs; };
  auto in_offset = [](const FactorHolder&) { return std::int64_t{0}; };
  auto out_offset = [](const FactorHolder& h) { return width(h.inputs); };
  return {cover(given, holders, r, inputs, in_range, in_offset),
          cover(given, holders, r, outputs, out_range, out_offset)};
}

std::pair<torch::Tensor, torch::Tensor> gathered_factors(Collectives& pg,
                                                         const std::vector<FactorHolder>& holders,
                                                         int me, const torch::Tensor& x,
                                                         const torch::Tensor& dy,
                                                         std::chrono::milliseconds timeout) {
  std::int64_t most = 0;
  for (const FactorHolder& h : holders)
    most = std::max(most, h.rows * (width(h.inputs) + width(h.outputs)));
  // Flattened and padded: [x | dy] row by row, then zeros.
  std::vector<torch::Tensor> in{torch::zeros({most}, x.options())};
  const torch::Tensor both = torch::cat({x, dy}, 1).contiguous().view({-1});
  in[0].slice(0, 0, both.numel()).copy_(both);
  std::vector<std::vector<torch::Tensor>> out(1);
  for (std::size_t i = 0; i < holders.size(); ++i) out[0].push_back(torch::empty_like(in[0]));
  pg.allgather(out, in)->wait(timeout);
  std::vector<torch::Tensor> given;
  for (std::size_t i = 0; i < holders.size(); ++i) {
    const FactorHolder& h = holders[i];
    given.push_back(out[0][i]
                        .slice(0, 0, h.rows * (width(h.inputs) + width(h.outputs)))
                        .view({h.rows, width(h.inputs) + width(h.outputs)}));
  }
  const FactorHolder& mine = holders[static_cast<std::size_t>(me)];
  std::vector<int> replicas;
  for (const FactorHolder& h : holders)
    if (std::find(replicas.begin(), replicas.end(), h.replica) == replicas.end())
      replicas.push_back(h.replica);
  std::sort(replicas.begin(), replicas.end());
  std::vector<torch::Tensor> xs, dys;
  for (int r : replicas) {
    auto [rx, rdy] = replica_factors(given, holders, r, mine.inputs, mine.outputs);
    xs.push_back(rx);
    dys.push_back(rdy);
  }
  return {torch::cat(xs), torch::cat(dys)};
}

}  // namespace hetplan::runtime::detail
