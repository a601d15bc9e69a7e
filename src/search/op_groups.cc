// Op grouping with METIS (op_groups.h). The forward graph is contracted first (ops that must share
// a group become one node), weighted with integers, and partitioned by METIS_PartGraphRecursive
// (recursive bisection, minimising the edge cut); parts are then expanded back to ops and
// renumbered by their first op.
//
// Recursive bisection rather than METIS_PartGraphKway: on these graphs (tens to a few thousand
// nodes, chains with skip edges) Kway put a 3-node graph into one part for k = 2, left parts
// empty at k of 40 on ResNet-50 and GPT-3 125M, and cut more bytes than a contiguous split of the
// ops into k equal-weight chunks on ResNet-50 (9.0 MB per sample against 6.8 at k = 8). Recursive
// bisection cuts no more than the contiguous split on ResNet-50, ResNet-101 and Inception-v3 at
// every k from 2 to 64; on transformers, whose block boundaries are clean cuts, the contiguous
// split is sometimes better (GPT-3 125M at 3 of those k, by a third at k = 2). Default options
// otherwise (its imbalance tolerance is 0.1% per bisection).
#include "hetplan/search/op_groups.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <metis.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>
#include <utility>

#include "hetplan/model/training.h"

namespace hetplan::search {
namespace {

// Largest integer weight given to a node or an edge: ratios between weights are kept to 1e-6 of
// the largest, and the sums METIS forms stay well within its 32-bit idx_t (at most 2^30 in all).
constexpr double kMaxIntWeight = 1e6;
constexpr double kMaxIntTotal = 1073741824.0;  // 2^30

// Integer weights for METIS: proportional to w, the largest `cap`, every one >= 1 (a zero weight
// too: METIS wants positive weights, and a free op still belongs somewhere).
std::vector<idx_t> scale_weights(const std::vector<double>& w, double cap) {
  const double top = w.empty() ? 0.0 : *std::max_element(w.begin(), w.end());
  std::vector<idx_t> out(w.size(), 1);
  if (top <= 0) return out;
  for (std::size_t i = 0; i < w.size(); ++i)
    out[i] = static_cast<idx_t>(std::max(1.0, std::round(w[i] / top * cap)));
  return out;
}

// The seed METIS takes: a non-negative idx_t. All 64 bits count (folded into 31).
idx_t metis_seed(std::uint64_t seed) {
  return static_cast<idx_t>((seed ^ (seed >> 31) ^ (seed >> 62)) & 0x7fffffffULL);
}

// Ops that must share a group, as node indices: node_of_op[op], nodes numbered by first op.
std::vector<int> contract(const model::Model& m, int& num_nodes) {
  const int n = static_cast<int>(m.ops.size());
  std::vector<int> rep(n);
  std::iota(rep.begin(), rep.end(), 0);
  // The tied LM head reads the embedding's table: both sit where the table is.
  const int owner = m.tied_owner(), reader = m.tied_reader();
  if (owner >= 0 && reader >= 0) rep[std::max(owner, reader)] = std::min(owner, reader);
  std::vector<int> node_of_op(n, -1);
  num_nodes = 0;
  for (int op = 0; op < n; ++op) node_of_op[op] = rep[op] == op ? num_nodes++ : node_of_op[rep[op]];
  return node_of_op;
}

// Distinct (producer, consumer) data edges; duplicated inputs count once.
template <class F>
void for_each_data_edge(const model::Model& m, F&& f) {
  std::vector<int> seen;
  for (int c = 0; c < static_cast<int>(m.ops.size()); ++c) {
    seen = m.ops[c].inputs;
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    for (int p : seen) f(p, c);
  }
}

// Groups numbered by their smallest op; group_of_op filled from part_of_op (any labels).
// METIS prints some complaints with printf and carries on ("Cannot bisect a graph with 0
// vertices" when recursive bisection hands a side more parts than it has nodes, despite the
// clamping below; the result then has fewer groups than asked, which callers see). hetplan's own
// output (JSON) goes to stdout, so stdout points at /dev/null while METIS runs. Progress and
// errors go to stderr, and nothing else writes stdout while a search runs.
class QuietStdout {
 public:
  QuietStdout() {
    std::fflush(stdout);
    saved_ = ::dup(STDOUT_FILENO);
    const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (saved_ >= 0 && null >= 0) ::dup2(null, STDOUT_FILENO);
    if (null >= 0) ::close(null);
  }
  ~QuietStdout() {
    std::fflush(stdout);
    if (saved_ >= 0) {
      ::dup2(saved_, STDOUT_FILENO);
      ::close(saved_);
    }
  }
  QuietStdout(const QuietStdout&) = delete;
  QuietStdout& operator=(const QuietStdout&) = delete;

 private:
  int saved_ = -1;
};

OpGrouping canonical(const std::vector<int>& part_of_op) {
  OpGrouping g;
  g.group_of_op.assign(part_of_op.size(), -1);
  std::map<int, int> renumber;
  for (std::size_t op = 0; op < part_of_op.size(); ++op) {
    auto [it, fresh] = renumber.try_emplace(part_of_op[op], static_cast<int>(renumber.size()));
    if (fresh) g.groups.emplace_back();
    g.group_of_op[op] = it->second;
    g.groups[it->second].push_back(static_cast<int>(op));
  }
  return g;
}

const char* metis_status(int status) {
  switch (status) {
    case METIS_ERROR_INPUT:
      return "invalid input";
    case METIS_ERROR_MEMORY:
      return "out of memory";
    default:
      return "error";
  }
}

}  // namespace

Result<OpGrouping> group_ops(const model::Model& m, const std::vector<double>& op_weight, int k,
                             std::uint64_t seed) {
  const std::string source = "group_ops";
  if (k < 1) return make_error(source, "k", fmt::format("expected at least 1 group, got {}", k));
  if (op_weight.size() != m.ops.size())
    return make_error(
        source, "op_weight",
        fmt::format("expected one weight per op ({}), got {}", m.ops.size(), op_weight.size()));
  for (std::size_t i = 0; i < op_weight.size(); ++i)
    if (!std::isfinite(op_weight[i]) || op_weight[i] < 0)
      return make_error(source, fmt::format("op_weight[{}] ({})", i, m.ops[i].name),
                        fmt::format("expected a finite weight >= 0, got {}", op_weight[i]));

  int num_nodes = 0;
  const std::vector<int> node_of_op = contract(m, num_nodes);
  const int parts = std::min(k, num_nodes);
  std::vector<int> part_of_node(num_nodes, 0);
  if (parts == num_nodes) std::iota(part_of_node.begin(), part_of_node.end(), 0);
  if (parts > 1 && parts < num_nodes) {
    std::vector<double> node_weight(num_nodes, 0.0);
    for (std::size_t op = 0; op < m.ops.size(); ++op) node_weight[node_of_op[op]] += op_weight[op];
    // A node heavier than a group's share counts as one share: it fills its group alone as far as
    // balance goes. Unclamped, recursive bisection hands a side with such a node more parts than
    // it can fill, and METIS prints "Cannot bisect a graph with 0 vertices" and leaves parts empty.
    const double share = std::accumulate(node_weight.begin(), node_weight.end(), 0.0) / parts;
    for (double& w : node_weight) w = std::min(w, share);
    // Undirected edges between nodes, parallel ones merged (their bytes summed); an edge inside a
    // node (the tied pair's own) is no edge for METIS.
    std::map<std::pair<int, int>, double> edges;
    for_each_data_edge(m, [&](int p, int c) {
      const int a = node_of_op[p], b = node_of_op[c];
      if (a != b) edges[{std::min(a, b), std::max(a, b)}] += m.output_bytes(p);
    });
    std::vector<double> edge_bytes;
    edge_bytes.reserve(edges.size());
    for (const auto& e : edges) edge_bytes.push_back(e.second);
    const std::vector<idx_t> vwgt =
        scale_weights(node_weight, std::min(kMaxIntWeight, std::floor(kMaxIntTotal / num_nodes)));
    const std::vector<idx_t> ewgt = scale_weights(
        edge_bytes,
        std::min(kMaxIntWeight, std::floor(kMaxIntTotal / std::max<double>(1, 2 * edges.size()))));

    // CSR adjacency (each edge in both directions), neighbours ascending.
    std::vector<std::vector<std::pair<idx_t, idx_t>>> adj(num_nodes);
    std::size_t e = 0;
    for (const auto& [ab, bytes] : edges) {
      adj[ab.first].emplace_back(ab.second, ewgt[e]);
      adj[ab.second].emplace_back(ab.first, ewgt[e]);
      ++e;
    }
    std::vector<idx_t> xadj{0}, adjncy, adjwgt;
    for (auto& list : adj) {
      std::sort(list.begin(), list.end());
      for (auto [v, w] : list) {
        adjncy.push_back(v);
        adjwgt.push_back(w);
      }
      xadj.push_back(static_cast<idx_t>(adjncy.size()));
    }
    // METIS reads these arrays even when there are no edges: never hand it a null pointer.
    if (adjncy.empty()) {
      adjncy.push_back(0);
      adjwgt.push_back(0);
    }

    idx_t options[METIS_NOPTIONS];
    METIS_SetDefaultOptions(options);
    options[METIS_OPTION_NUMBERING] = 0;
    options[METIS_OPTION_SEED] = metis_seed(seed);
    idx_t nvtxs = num_nodes, ncon = 1, nparts = parts, objval = 0;
    std::vector<idx_t> vw = vwgt;
    std::vector<idx_t> part(num_nodes, 0);
    const QuietStdout quiet;
    const int status = METIS_PartGraphRecursive(&nvtxs, &ncon, xadj.data(), adjncy.data(),
                                                vw.data(), nullptr, adjwgt.data(), &nparts, nullptr,
                                                nullptr, options, &objval, part.data());
    if (status != METIS_OK)
      return make_error(source, "METIS_PartGraphRecursive",
                        fmt::format("{} ({} nodes, {} edges, {} parts)", metis_status(status),
                                    num_nodes, edges.size(), parts));
    for (int v = 0; v < num_nodes; ++v) {
      if (part[v] < 0 || part[v] >= parts)
        return make_error(source, "METIS_PartGraphRecursive",
                          fmt::format("node {} put in part {} of {}", v, part[v], parts));
      part_of_node[v] = part[v];
    }
  }
  std::vector<int> part_of_op(m.ops.size());
  for (std::size_t op = 0; op < m.ops.size(); ++op) part_of_op[op] = part_of_node[node_of_op[op]];
  return canonical(part_of_op);
}

int default_group_count(const model::Model& m) {
  const int ops = static_cast<int>(m.ops.size());
  const int g = std::clamp(static_cast<int>(std::lround(2 * std::sqrt(ops))), 8, 64);
  return std::max(1, std::min(ops, g));
}

std::vector<double> op_compute_weights(const model::Model& m, const cluster::DeviceType& dev,
                                       const cost::ComputeCostModel& cost) {
  const model::TrainingGraph tg = model::derive_training_graph(m);
  std::vector<double> w(m.ops.size(), 0.0);
  for (const model::TrainOp& f : tg.forward)
    w[f.op] += cost.op_time(dev, f, 1.0, 1.0, m.dtype).value;
  for (const model::TrainOp& b : tg.backward)
    w[b.op] += cost.op_time(dev, b, 1.0, 1.0, m.dtype).value;
  return w;
}

double cut_bytes(const model::Model& m, const OpGrouping& g) {
  double bytes = 0;
  for_each_data_edge(m, [&](int p, int c) {
    if (g.group_of_op[p] != g.group_of_op[c]) bytes += m.output_bytes(p);
  });
  return bytes;
}

}  // namespace hetplan::search
