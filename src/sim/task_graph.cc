#include "task_graph.h"

namespace hetplan::sim::detail {

Successors TaskGraph::successors() const {
  Successors out;
  out.begin.assign(tasks.size() + 1, 0);
  for (const Edge& e : edges) ++out.begin[e.from + 1];
  for (std::size_t t = 0; t < tasks.size(); ++t) out.begin[t + 1] += out.begin[t];
  out.to.resize(edges.size());
  std::vector<int> next(out.begin.begin(), out.begin.end() - 1);
  for (const Edge& e : edges) out.to[next[e.from]++] = e.to;
  return out;
}

}  // namespace hetplan::sim::detail
