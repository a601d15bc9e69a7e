#include "chunk_order.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace hetplan::runtime::detail {

std::vector<OrderedChunk> order_chunks(const std::vector<std::int64_t>& layer_numel,
                                       std::int64_t chunk_numel, plan::GradPriority priority,
                                       double loss_bound,
                                       const std::vector<double>& chunk_mean_square) {
  chunk_numel = std::max<std::int64_t>(1, chunk_numel);
  std::vector<OrderedChunk> chunks;  // layout order
  std::int64_t at = 0;
  for (std::size_t l = 0; l < layer_numel.size(); ++l) {
    for (std::int64_t o = 0; o < layer_numel[l]; o += chunk_numel)
      chunks.push_back({at + o, std::min(chunk_numel, layer_numel[l] - o), static_cast<int>(l)});
    at += layer_numel[l];
  }
  const bool magnitude = priority == plan::GradPriority::layer_magnitude &&
                         chunk_mean_square.size() == chunks.size();
  std::vector<std::size_t> order(chunks.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  if (magnitude)
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      if (chunks[a].layer != chunks[b].layer) return chunks[a].layer < chunks[b].layer;
      return chunk_mean_square[a] > chunk_mean_square[b];
    });
  // The droppable ones: least important first, while they fit the bound.
  if (loss_bound > 0) {
    std::vector<std::size_t> least = order;
    std::reverse(least.begin(), least.end());
    if (magnitude)
      std::stable_sort(least.begin(), least.end(), [&](std::size_t a, std::size_t b) {
        return chunk_mean_square[a] < chunk_mean_square[b];
      });
    const double budget = loss_bound * static_cast<double>(at);
    double used = 0;
    for (std::size_t i : least) {
      if (!chunk_mean_square.empty() && i < chunk_mean_square.size() &&
          std::isinf(chunk_mean_square[i]))
        continue;
      if (used + static_cast<double>(chunks[i].numel) > budget) break;
      used += static_cast<double>(chunks[i].numel);
      chunks[i].droppable = true;
    }
  }
  std::vector<OrderedChunk> out;
  std::int64_t kept_total = 0;
  for (const auto& c : chunks)
    if (!c.droppable) kept_total += c.numel;
  std::int64_t kept_before = 0;
  for (std::size_t i : order) {
    OrderedChunk c = chunks[i];
    if (c.droppable) {
      c.cls = kTrafficClasses - 1;
    } else {
      c.cls = 2 * kept_before < kept_total ? 0 : 1;
      kept_before += c.numel;
    }
    out.push_back(c);
  }
  return out;
}

std::vector<double> chunk_mean_squares(const float* flat, const std::vector<OrderedChunk>& chunks,
                                       const std::vector<char>& complete) {
  std::vector<std::size_t> by_offset(chunks.size());
  std::iota(by_offset.begin(), by_offset.end(), std::size_t{0});
  std::sort(by_offset.begin(), by_offset.end(),
            [&](std::size_t a, std::size_t b) { return chunks[a].offset < chunks[b].offset; });
  std::vector<double> out;
  for (std::size_t k : by_offset) {
    const OrderedChunk* c = &chunks[k];
    if (k < complete.size() && !complete[k]) {
      out.push_back(std::numeric_limits<double>::infinity());
      continue;
    }
    double sum = 0;
    for (std::int64_t i = 0; i < c->numel; ++i) {
      const double v = flat[c->offset + i];
      sum += v * v;
    }
    out.push_back(c->numel > 0 ? sum / static_cast<double>(c->numel) : 0.0);
  }
  return out;
}

}  // namespace hetplan::runtime::detail
