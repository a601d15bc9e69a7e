// The graph and state TAG's network reads (tag_features.h).
#include "hetplan/search/tag_features.h"

#include <algorithm>
#include <cmath>

#include "hetplan/search/tag.h"

namespace hetplan::search {
namespace {

std::size_t at(int row, int cols, int col) {
  return static_cast<std::size_t>(row) * static_cast<std::size_t>(cols) +
         static_cast<std::size_t>(col);
}

// The device type on which the whole model runs fastest (lowest index among equals).
int fastest_type(const TagProblem& p) {
  const auto& mt = p.model_time();
  int best = 0;
  for (std::size_t t = 1; t < mt.size(); ++t)
    if (mt[t] < mt[static_cast<std::size_t>(best)]) best = static_cast<int>(t);
  return best;
}

// Device d's speed relative to the fastest type's (its CPU share included).
double speed(const TagProblem& p, int d) {
  const cluster::Cluster& c = p.context().cluster;
  const double t = p.model_time()[static_cast<std::size_t>(c.devices[d].type)];
  const double fast = p.model_time()[static_cast<std::size_t>(fastest_type(p))];
  return t > 0 ? c.nodes[c.devices[d].node].cpu_share * fast / t : 1.0;
}

// The groups' compute shares on the fastest type (summing to 1).
std::vector<double> compute_shares(const TagProblem& p) {
  const int t = fastest_type(p);
  std::vector<double> share;
  double total = 0;
  for (const auto& g : p.group_time()) {
    share.push_back(g[static_cast<std::size_t>(t)]);
    total += share.back();
  }
  for (double& s : share) s = total > 0 ? s / total : 1.0 / static_cast<double>(share.size());
  return share;
}

}  // namespace

TagGraph tag_graph(const TagProblem& p) {
  const model::Model& m = p.context().model;
  const cluster::Cluster& c = p.context().cluster;
  const OpGrouping& grouping = p.grouping();
  TagGraph g;
  g.groups = static_cast<int>(grouping.groups.size());
  g.devices = c.num_devices();
  g.actions = static_cast<int>(p.actions().size());
  g.microbatch_options = static_cast<int>(p.microbatch_counts().size());
  const int G = g.groups, N = g.devices;
  const std::vector<double> share = compute_shares(p);

  // Data flow between groups, per sample.
  std::vector<double> flow(static_cast<std::size_t>(G) * G, 0.0), cut(G, 0.0);
  double flow_total = 0;
  int edges = 0;
  for (std::size_t op = 0; op < m.ops.size(); ++op)
    for (int in : m.ops[op].inputs) {
      const int a = grouping.group_of_op[static_cast<std::size_t>(in)];
      const int b = grouping.group_of_op[op];
      if (a == b) continue;
      const auto& src = m.ops[static_cast<std::size_t>(in)];
      const double bytes = src.output_bytes > 0 ? src.output_bytes : src.bytes_written;
      if (flow[at(a, G, b)] == 0) edges += 2;
      flow[at(a, G, b)] += bytes;
      flow[at(b, G, a)] += bytes;
      cut[a] += bytes;
      cut[b] += bytes;
      flow_total += 2 * bytes;
    }
  const double mean_edge = edges > 0 ? flow_total / edges : 1.0;
  g.flow.resize(flow.size());
  for (std::size_t i = 0; i < flow.size(); ++i)
    g.flow[i] = static_cast<float>(std::log1p(flow[i] / std::max(mean_edge, 1e-30)));

  // Groups.
  double params_total = 0;
  std::vector<double> params(G, 0.0);
  for (std::size_t op = 0; op < m.ops.size(); ++op) {
    params[grouping.group_of_op[op]] += static_cast<double>(m.ops[op].params);
    params_total += static_cast<double>(m.ops[op].params);
  }
  std::vector<int> position(G, 0);
  for (std::size_t i = 0; i < p.order().size(); ++i) position[p.order()[i]] = static_cast<int>(i);
  double cut_total = 0;
  for (double x : cut) cut_total += x;
  for (int k = 0; k < G; ++k) {
    const double ops = static_cast<double>(grouping.groups[k].size());
    for (double x : {share[k], std::log10(share[k] + 1e-4) / 4,
                     params_total > 0 ? params[k] / params_total : 0.0,
                     p.has_factor_op(k) ? 1.0 : 0.0, ops / static_cast<double>(m.ops.size()),
                     G > 1 ? position[k] / static_cast<double>(G - 1) : 0.0,
                     cut_total > 0 ? cut[k] / cut_total : 0.0, std::log10(ops) / 3})
      g.group_x.push_back(static_cast<float>(x));
  }

  // Links: log10 of each pair's path bandwidth over the slowest pair's.
  std::vector<double> bw(static_cast<std::size_t>(N) * N, 0.0);
  double slowest = 0, fastest = 0;
  for (int a = 0; a < N; ++a)
    for (int b = 0; b < N; ++b)
      if (a != b) {
        bw[at(a, N, b)] = c.path_bandwidth(a, b).value;
        if (slowest == 0 || bw[at(a, N, b)] < slowest) slowest = bw[at(a, N, b)];
        fastest = std::max(fastest, bw[at(a, N, b)]);
      }
  g.link.assign(bw.size(), 0.0f);
  for (std::size_t i = 0; i < bw.size(); ++i)
    if (bw[i] > 0) g.link[i] = static_cast<float>(std::log10(bw[i] / slowest));
  const float widest = slowest > 0 ? static_cast<float>(std::log10(fastest / slowest)) : 0.0f;

  // Devices (the static columns).
  double memory = 0;
  for (int d = 0; d < N; ++d) memory = std::max(memory, c.type_of(d).memory.value);
  for (int d = 0; d < N; ++d) {
    double mean_link = 0;
    for (int e = 0; e < N; ++e) mean_link += g.link[at(d, N, e)];
    const auto& node = c.nodes[c.devices[d].node];
    for (double x :
         {speed(p, d), memory > 0 ? c.type_of(d).memory.value / memory : 1.0, node.cpu_share,
          static_cast<double>(node.devices.size()) / N, N > 1 ? mean_link / (N - 1) : 0.0})
      g.device_x.push_back(static_cast<float>(x));
  }

  // Candidate edges: a group's time on a device as a fraction of the model's on the fastest type.
  const int t0 = fastest_type(p);
  double model_fast = 0;
  for (const auto& gt : p.group_time()) model_fast += gt[static_cast<std::size_t>(t0)];
  for (int k = 0; k < G; ++k)
    for (int d = 0; d < N; ++d) {
      const double t = p.group_time()[k][static_cast<std::size_t>(c.devices[d].type)] /
                       std::max(c.nodes[c.devices[d].node].cpu_share, 1e-9);
      g.candidate.push_back(static_cast<float>(model_fast > 0 ? t / model_fast : 0.0));
    }

  // Actions.
  for (const auto& a : p.actions()) {
    double mean_speed = 0;
    float narrowest = widest;
    for (std::size_t i = 0; i < a.devices.size(); ++i) {
      mean_speed += speed(p, a.devices[i]);
      for (std::size_t j = 0; j < i; ++j)
        narrowest = std::min(narrowest, g.link[at(a.devices[i], N, a.devices[j])]);
    }
    mean_speed /= static_cast<double>(a.devices.size());
    const bool one = a.devices.size() == 1;
    for (double x : {static_cast<double>(a.devices.size()) / N, one ? 1.0 : 0.0,
                     !one && !a.split && a.sync == plan::SyncMethod::all_reduce ? 1.0 : 0.0,
                     !one && !a.split && a.sync == plan::SyncMethod::parameter_server ? 1.0 : 0.0,
                     !one && !a.split && a.sync == plan::SyncMethod::sufficient_factor ? 1.0 : 0.0,
                     mean_speed, static_cast<double>(narrowest)})
      g.action_x.push_back(static_cast<float>(x));
    std::vector<float> row(static_cast<std::size_t>(N), 0.0f);
    for (int d : a.devices) row[static_cast<std::size_t>(d)] = 1.0f;
    g.membership.insert(g.membership.end(), row.begin(), row.end());
  }

  // Micro-batch counts.
  const double B = static_cast<double>(p.context().options.global_batch);
  for (int M : p.microbatch_counts()) {
    g.microbatch_x.push_back(static_cast<float>(std::log2(M) / 5));
    g.microbatch_x.push_back(static_cast<float>(std::log2(std::max(1.0, B / M / N)) / 5));
  }

  // Global: the parameters' all-reduce over the slowest and the fastest pair against compute.
  const double param_bytes =
      static_cast<double>(m.parameters()) * static_cast<double>(model::dtype_bytes(m.dtype));
  const double compute_s =
      std::max(1e-12, p.model_time()[static_cast<std::size_t>(t0)] * B / std::max(1, N));
  auto ratio = [&](double b) {
    return b > 0 ? std::clamp(std::log10(2 * param_bytes / b / compute_s), -6.0, 6.0) / 3 : -2.0;
  };
  for (double x :
       {ratio(slowest), ratio(fastest), std::log10(std::max(1, N)), std::log10(std::max(1, G))})
    g.global_x.push_back(static_cast<float>(x));
  return g;
}

TagState tag_state(const TagProblem& p, std::span<const int> prefix) {
  const TagGraph& g = p.graph();
  TagState s;
  s.decision = static_cast<int>(prefix.size());
  s.group = prefix.empty() || prefix.size() > p.order().size() ? -1 : p.group_at(s.decision);
  s.group_state.assign(static_cast<std::size_t>(g.groups) * kTagStateFeatures, 0.0f);
  s.device_load.assign(static_cast<std::size_t>(g.devices), 0.0f);
  const std::vector<double> share = compute_shares(p);
  for (std::size_t i = 1; i < prefix.size(); ++i) {
    const int k = p.group_at(static_cast<int>(i));
    const auto& a = p.actions()[static_cast<std::size_t>(prefix[i])];
    const bool one = a.devices.size() == 1;
    const bool synced = !one && !a.split;  // TAG's split groups (one replica) synchronise nothing
    plan::SyncMethod sync = a.sync;
    if (sync == plan::SyncMethod::sufficient_factor && !p.has_factor_op(k))
      sync = plan::SyncMethod::all_reduce;
    const float row[kTagStateFeatures] = {
        1.0f,
        0.0f,
        static_cast<float>(a.devices.size()) / static_cast<float>(g.devices),
        one ? 1.0f : 0.0f,
        synced && sync == plan::SyncMethod::all_reduce ? 1.0f : 0.0f,
        synced && sync == plan::SyncMethod::parameter_server ? 1.0f : 0.0f,
        synced && sync == plan::SyncMethod::sufficient_factor ? 1.0f : 0.0f};
    std::copy(std::begin(row), std::end(row), s.group_state.begin() + at(k, kTagStateFeatures, 0));
    double total = 0;
    for (int d : a.devices) total += speed(p, d);
    for (int d : a.devices)
      s.device_load[static_cast<std::size_t>(d)] +=
          static_cast<float>(share[static_cast<std::size_t>(k)] * speed(p, d) / total);
  }
  if (s.group >= 0) s.group_state[at(s.group, kTagStateFeatures, 1)] = 1.0f;
  const int M = prefix.empty() ? 0 : p.microbatch_counts()[static_cast<std::size_t>(prefix[0])];
  s.global_state = {M > 0 ? static_cast<float>(std::log2(M) / 5) : 0.0f,
                    static_cast<float>(std::max<std::size_t>(prefix.size(), 1) - 1) /
                        static_cast<float>(std::max(1, g.groups))};
  if (s.decision == 0) {
    s.mask.assign(static_cast<std::size_t>(g.microbatch_options), 1.0f);
  } else if (s.group >= 0) {  // a complete prefix decides nothing more: no options
    s.mask.assign(static_cast<std::size_t>(g.actions), 1.0f);
    for (int a = 0; a < g.actions; ++a)
      if (p.actions()[static_cast<std::size_t>(a)].sync == plan::SyncMethod::sufficient_factor &&
          !p.has_factor_op(s.group))
        s.mask[static_cast<std::size_t>(a)] = 0.0f;
  }
  return s;
}

}  // namespace hetplan::search
