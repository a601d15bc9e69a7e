#include "hetplan/search/estimate.h"

#include <algorithm>
#include <cmath>

#include "hetplan/cost/collective_cost.h"
#include "hetplan/cost/memory_cost.h"

namespace hetplan::search {
namespace {

// Replicas that cost the same: their devices' types, the node group of the first device, and
// whether they share one node (then their tensor-parallel collectives use the same links).
std::vector<int> replica_class(const cluster::Cluster& c, const plan::Replica& r) {
  std::vector<int> key;
  bool one_node = true;
  for (int d : r.devices) {
    key.push_back(c.devices[d].type);
    one_node = one_node && c.same_node(d, r.devices.front());
  }
  key.push_back(std::max(0, c.group_of(r.devices.front())));
  key.push_back(one_node ? 1 : 0);
  return key;
}

double share_of(const plan::Replica& r, std::size_t j) {
  return r.tp_shares.empty() ? 1.0 / static_cast<double>(r.devices.size()) : r.tp_shares[j];
}

}  // namespace

std::size_t Estimator::MemoryKeyHash::operator()(const MemoryKey& k) const {
  // Every input word is spread over all bits (the splitmix64 finaliser) before it is combined:
  // multiplying whole words alone left the keys' differences in few bits, and long chains.
  std::size_t h = 0x9e3779b97f4a7c15ull;
  auto mix = [&](std::size_t v) {
    v += 0x9e3779b97f4a7c15ull + h;
    v = (v ^ (v >> 30)) * 0xbf58476d1ce4e5b9ull;
    v = (v ^ (v >> 27)) * 0x94d049bb133111ebull;
    h = v ^ (v >> 31);
  };
  for (int v : {k.recompute, k.zero, k.first, k.count, k.tp, k.dp, k.sp ? 1 : 0})
    mix(std::hash<int>{}(v));
  for (double v : {k.share, k.samples, k.inflight}) mix(std::hash<double>{}(v));
  return h;
}

Estimator::Estimator(const model::Model& m, const cluster::Cluster& c, const SearchOptions& opts)
    : m_(m), c_(c), opts_(opts) {}

Estimator::~Estimator() = default;

const sim::LayerCostTable& Estimator::layer_costs(const plan::Plan& settings,
                                                  const plan::Replica& r, double samples,
                                                  int dp) const {
  const int zero_split = settings.zero_stage >= 1 ? dp : 1;
  SettingsKey skey{static_cast<int>(settings.recompute), settings.sequence_parallel,
                   settings.zero_stage, settings.uneven_collectives, settings.op_overrides};
  auto tkey = std::make_tuple(skey, replica_class(c_, r), r.tp_shares, samples, zero_split);
  auto it = tables_.find(tkey);
  if (it != tables_.end()) return it->second;
  auto& coster = costers_[skey];
  if (!coster) {
    plan::Plan s = settings;
    s.stages.clear();
    coster = std::make_unique<sim::LayerCosts>(m_, c_, s, opts_.sim);
  }
  return tables_.emplace(std::move(tkey), coster->replica(r, samples, dp)).first->second;
}

double Estimator::device_memory(const plan::Plan& settings, int first, int count,
                                const plan::Replica& r, int j, int dp, double samples,
                                double inflight) const {
  const double share = share_of(r, static_cast<std::size_t>(j));
  const int tp = static_cast<int>(r.devices.size());
  const MemoryKey key{static_cast<int>(settings.recompute),
                      settings.zero_stage,
                      first,
                      count,
                      tp,
                      dp,
                      settings.sequence_parallel,
                      share,
                      samples,
                      inflight};
  // Plans with op overrides are rare among the candidates and not in the key: not cached.
  const bool cached = settings.op_overrides.empty();
  MemorySlot* slot = nullptr;
  if (cached) {
    if (memory_.empty()) memory_.resize(kMemorySlots);
    slot = &memory_[MemoryKeyHash{}(key) & (kMemorySlots - 1)];
    if (slot->bytes >= 0 && slot->key == key) return slot->bytes;
  }
  const cost::MemoryConfig cfg =
      sim::memory_config(m_, settings, first, count, r, j, dp, samples, inflight);
  const double bytes = cost::stage_memory(m_, cfg).total().value;
  if (slot) *slot = MemorySlot{key, bytes};
  return bytes;
}

double Estimator::sync_time(const plan::Plan& settings, int first, int count,
                            const std::vector<plan::Replica>& replicas) const {
  if (replicas.size() < 2) return 0;
  double params = 0;
  for (int li = first; li < first + count; ++li)
    params += static_cast<double>(m_.layer_parameters(li));
  const auto& r0 = replicas.front();
  const std::size_t tp = r0.devices.size();
  // One collective per tensor-parallel rank, in parallel; groups crossing nodes share the NICs.
  std::vector<int> group;
  double share = 0;
  for (const auto& r : replicas) {
    group.push_back(r.devices.front());
    share = std::max(share, share_of(r, 0));
  }
  const double bytes = params * model::dtype_bytes(m_.dtype) * share;
  auto key = std::make_tuple(group, bytes);
  auto it = sync_.find(key);
  double t;
  if (it != sync_.end()) {
    t = it->second;
  } else {
    cost::CollectiveRequest req;
    req.kind =
        settings.zero_stage >= 1 ? cost::Collective::reduce_scatter : cost::Collective::all_reduce;
    req.devices = group;
    req.bytes = Bytes(bytes);
    t = cost::collective_cost(c_, req, opts_.sim.network).time.value;
    if (settings.zero_stage == 1 || settings.zero_stage == 2) {
      req.kind = cost::Collective::all_gather;
      t += cost::collective_cost(c_, req, opts_.sim.network).time.value;
    }
    sync_.emplace(key, t);
  }
  bool crosses = false;
  for (const auto& r : replicas) crosses = crosses || !c_.same_node(r.devices.front(), group[0]);
  if (crosses && tp > 1) {
    const int g = c_.group_of(group[0]);
    const int nics = g < 0 ? 1 : std::max(1, c_.groups[g].nic_count);
    t *= std::max(1.0, static_cast<double>(tp) / nics);
  }
  return t;
}

double Estimator::boundary_time(int layer, double samples, const plan::Replica& from,
                                const plan::Replica& to) const {
  const double bytes = m_.layer_output_bytes(layer) * samples;
  const std::size_t k = std::min(from.devices.size(), to.devices.size());
  const int a = from.devices.front(), b = to.devices.front();
  if (a == b) return 0;
  auto key = std::make_tuple(a, b, bytes / static_cast<double>(k));
  auto it = p2p_.find(key);
  if (it != p2p_.end()) return it->second;
  cost::CollectiveRequest req;
  req.kind = cost::Collective::p2p;
  req.devices = {a, b};
  req.bytes = Bytes(std::get<2>(key));
  const double t = cost::collective_cost(c_, req, opts_.sim.network).time.value;
  p2p_.emplace(key, t);
  return t;
}

Estimate Estimator::estimate(const plan::Plan& p) const {
  Estimate e;
  const int S = static_cast<int>(p.stages.size());
  const double m = p.num_microbatches;
  const double mb_samples = static_cast<double>(p.global_batch) / m;
  std::vector<double> stage_time(S, 0), stage_bwd(S, 0), stage_tail(S, 0);
  for (int s = 0; s < S; ++s) {
    const auto& st = p.stages[s];
    const int dp = static_cast<int>(st.replicas.size());
    double fwd = 0, bwd = 0, opt = 0;
    for (const auto& r : st.replicas) {
      const double samples = r.batch_share * mb_samples;
      const auto& t = layer_costs(p, r, samples, dp);
      double f = 0, b = 0, o = 0;
      for (int li = st.first_layer; li < st.first_layer + st.num_layers; ++li) {
        f += t.forward[li];
        b += t.backward[li];
        o += t.optimizer[li];
      }
      fwd = std::max(fwd, f);
      bwd = std::max(bwd, b);
      opt = std::max(opt, o);
      // Memory of every device of this replica.
      const double inflight = p.schedule == plan::Schedule::gpipe ? m : std::min<double>(m, S - s);
      for (std::size_t j = 0; j < r.devices.size(); ++j) {
        const double bytes = device_memory(p, st.first_layer, st.num_layers, r, static_cast<int>(j),
                                           dp, samples, inflight);
        const double cap = c_.type_of(r.devices[j]).memory.value;
        e.max_peak_bytes = std::max(e.max_peak_bytes, bytes);
        e.memory_ratio = std::max(e.memory_ratio, bytes / cap);
        e.fits = e.fits && bytes <= cap;
      }
    }
    double comm = 0;
    if (s + 1 < S) {
      const int last = st.first_layer + st.num_layers - 1;
      double worst = 0;
      for (const auto& r : st.replicas) worst = std::max(worst, r.batch_share * mb_samples);
      comm = 2 * boundary_time(last, worst, st.replicas.front(), p.stages[s + 1].replicas.front());
    }
    stage_time[s] = fwd + bwd + comm;
    stage_bwd[s] = bwd;
    const double sync = sync_time(p, st.first_layer, st.num_layers, st.replicas);
    stage_tail[s] = std::max(0.0, sync - bwd) + opt;
  }
  double sum = 0, worst = 0;
  for (double t : stage_time) {
    sum += t;
    worst = std::max(worst, t);
  }
  const double pipe = sum + (m - 1) * worst;
  double end = 0, before = 0;
  for (int s = 0; s < S; ++s) {
    end = std::max(end, pipe - before + stage_tail[s]);
    before += stage_bwd[s];
  }
  e.time_s = end;
  return e;
}

}  // namespace hetplan::search
