#include "hetplan/search/estimate.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

#include "hetplan/core/hash.h"
#include "hetplan/cost/collective_cost.h"
#include "hetplan/cost/memory_cost.h"
#include "hetplan/plan/replica_slots.h"
#include "hetplan/sim/schedule_order.h"
#include "search_space.h"

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

// The first of the collectives that synchronise gradients over `replicas`, as the simulator's
// StageCoster::sync_parts runs them: k (the smallest replica's size) run together, the first over
// each replica's first device at the largest share a replica puts in it (its ranks 0, k, 2k, ...).
struct FirstSlot {
  std::vector<int> group;
  double share = 0;
  std::size_t k = 0;
};

FirstSlot first_slot(const std::vector<const plan::Replica*>& replicas) {
  FirstSlot f;
  f.k = replicas.front()->devices.size();
  for (const auto* r : replicas) f.k = std::min(f.k, r->devices.size());
  for (const auto* r : replicas) {
    f.group.push_back(r->devices.front());
    f.share = std::max(f.share, plan::slot_share(*r, 0, f.k));
  }
  return f;
}

}  // namespace

std::size_t Estimator::MemoryKeyHash::operator()(const MemoryKey& k) const {
  std::size_t h = kHashSeed;
  for (int v :
       {k.recompute, k.attention, k.zero, k.first, k.count, k.tp, k.dp, k.overrides, k.sp ? 1 : 0})
    h = hash_mix(h, std::hash<int>{}(v));
  for (double v : {k.share, k.samples, k.inflight}) h = hash_mix(h, std::hash<double>{}(v));
  return h;
}

Estimator::Estimator(const model::Model& m, const cluster::Cluster& c, const SearchOptions& opts)
    : m_(m), c_(c), opts_(opts), link_rate_(cost::link_rates(c, opts.sim.network)) {}

Estimator::~Estimator() = default;

const sim::LayerCostTable& Estimator::layer_costs(const plan::Plan& settings,
                                                  const plan::Replica& r, double samples,
                                                  int dp) const {
  const int zero_split = settings.zero_stage >= 1 ? dp : 1;
  SettingsKey skey{static_cast<int>(settings.recompute), static_cast<int>(settings.attention),
                   settings.sequence_parallel,           settings.zero_stage,
                   settings.uneven_collectives,          settings.op_overrides};
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
  const double share = plan::tp_share(r, static_cast<std::size_t>(j));
  const int tp = static_cast<int>(r.devices.size());
  int overrides = 0;
  if (!settings.op_overrides.empty())
    overrides =
        override_ids_.try_emplace(settings.op_overrides, static_cast<int>(override_ids_.size()) + 1)
            .first->second;
  const MemoryKey key{static_cast<int>(settings.recompute),
                      static_cast<int>(settings.attention),
                      settings.zero_stage,
                      first,
                      count,
                      tp,
                      dp,
                      overrides,
                      settings.sequence_parallel,
                      share,
                      samples,
                      inflight};
  if (memory_.empty()) memory_.resize(kMemorySlots);
  MemorySlot* slot = &memory_[MemoryKeyHash{}(key) & (kMemorySlots - 1)];
  if (slot->bytes >= 0 && slot->key == key) return slot->bytes;
  const cost::MemoryConfig cfg =
      sim::memory_config(m_, settings, first, count, r, j, dp, samples, inflight);
  const double bytes = cost::stage_memory(m_, cfg).total().value;
  *slot = MemorySlot{key, bytes};
  return bytes;
}

cost::StageMemoryTable Estimator::memory_table(const plan::Plan& settings, const plan::Replica& r,
                                               int j, int dp, double samples,
                                               double inflight) const {
  return sim::memory_table(m_, settings, r, j, dp, samples, inflight);
}

double Estimator::nic_sharing(const std::vector<int>& group, std::size_t tp) const {
  bool crosses = false;
  for (int d : group) crosses = crosses || !c_.same_node(d, group[0]);
  if (!crosses || tp < 2) return 1;
  const int g = c_.group_of(group[0]);
  const int nics = g < 0 ? 1 : std::max(1, c_.groups[g].nic_count);
  return std::max(1.0, static_cast<double>(tp) / nics);
}

Estimator::SyncTime Estimator::sync_time(const plan::Plan& settings, int first, int count,
                                         const std::vector<plan::Replica>& replicas) const {
  if (replicas.size() < 2) return {};
  double params = 0;
  for (int li = first; li < first + count; ++li)
    params += static_cast<double>(m_.layer_parameters(li));
  // One collective per tensor-parallel rank of the smallest replica, in parallel; groups crossing
  // nodes share the NICs.
  std::vector<const plan::Replica*> all;
  for (const auto& r : replicas) all.push_back(&r);
  const auto [group, share, tp] = first_slot(all);
  const double bytes = params * model::dtype_bytes(m_.dtype) * share;
  auto key = std::make_tuple(group, bytes, settings.zero_stage);
  auto it = sync_.find(key);
  SyncTime t;
  if (it != sync_.end()) {
    t = it->second;
  } else {
    cost::CollectiveRequest req;
    req.kind =
        settings.zero_stage >= 1 ? cost::Collective::reduce_scatter : cost::Collective::all_reduce;
    req.devices = group;
    req.bytes = Bytes(bytes);
    t.reduce = cost::collective_cost(c_, req, opts_.sim.network).time.value;
    if (settings.zero_stage >= 1) {
      req.kind = cost::Collective::all_gather;
      t.gather = cost::collective_cost(c_, req, opts_.sim.network).time.value;
    }
    sync_.emplace(key, t);
  }
  const double sharing = nic_sharing(group, tp);
  return {t.reduce * sharing, t.gather * sharing};
}

const cost::CollectiveCost& Estimator::p2p(int from, int to, double bytes) const {
  const auto key = std::make_tuple(from, to, bytes);
  auto it = p2p_.find(key);
  if (it != p2p_.end()) return it->second;
  cost::CollectiveRequest req;
  req.kind = cost::Collective::p2p;
  req.devices = {from, to};
  req.bytes = Bytes(bytes);
  return p2p_.emplace(key, cost::collective_cost(c_, req, opts_.sim.network)).first->second;
}

double Estimator::boundary_time(int layer, double samples, const plan::Replica& from,
                                const plan::Replica& to) const {
  const double bytes = m_.layer_output_bytes(layer) * samples;
  const std::size_t k = std::min(from.devices.size(), to.devices.size());
  const int a = from.devices.front(), b = to.devices.front();
  if (a == b) return 0;
  return p2p(a, b, bytes / static_cast<double>(k)).time.value;
}

double Estimator::boundary_time(const plan::Plan& p, int s) const {
  const plan::Stage &from = p.stages[s], &to = p.stages[s + 1];
  const double per_sample = m_.layer_output_bytes(from.first_layer + from.num_layers - 1) *
                            static_cast<double>(p.global_batch) / p.num_microbatches;
  std::vector<const cost::CollectiveCost*> parts;
  std::unordered_map<int, double> link_bytes;
  // The replicas' batch intervals laid out in order over [0, 1) (as sim::batch_overlap does),
  // walked together: each pair whose intervals overlap exchanges those samples' rows.
  double a0 = 0, b0 = 0;
  for (std::size_t a = 0, b = 0; a < from.replicas.size() && b < to.replicas.size();) {
    const auto &ra = from.replicas[a], &rb = to.replicas[b];
    const double a1 = a + 1 == from.replicas.size() ? 1.0 : a0 + ra.batch_share;
    const double b1 = b + 1 == to.replicas.size() ? 1.0 : b0 + rb.batch_share;
    const double overlap = std::min(a1, b1) - std::max(a0, b0);
    if (overlap > 0 && ra.devices.front() != rb.devices.front()) {
      const std::size_t k = std::min(ra.devices.size(), rb.devices.size());
      for (std::size_t j = 0; j < k; ++j) {
        parts.push_back(
            &p2p(ra.devices[j], rb.devices[j], per_sample * overlap / static_cast<double>(k)));
        for (const auto& load : parts.back()->loads) link_bytes[load.link] += load.bytes;
      }
    }
    if (a1 <= b1) a0 = a1, ++a;
    if (b1 <= a1) b0 = b1, ++b;
  }
  // Each transfer's bandwidth term becomes the longest any of its links takes to carry every
  // transfer's bytes over it (a link's own total at its own rate: the most shared link need not
  // be the slowest, as a node's NIC that every part crosses and a spine uplink that half of them
  // hash onto).
  double t = 0;
  for (const auto* part : parts) {
    double transfer = (part->time - part->latency).value;
    for (const auto& load : part->loads)
      if (load.bytes > 0)
        transfer = std::max(transfer, link_bytes[load.link] / link_rate_[load.link]);
    t = std::max(t, part->latency.value + transfer);
  }
  return t;
}

std::pair<int, int> Estimator::tied_stages(const plan::Plan& p) const {
  const int head = m_.tied_reader();
  if (head < 0) return {0, 0};
  return {plan::stage_of_layer(p, m_.layer_of(m_.tied_owner())),
          plan::stage_of_layer(p, m_.layer_of(head))};
}

double Estimator::tied_sync_time(const plan::Plan& p, int a, int b) const {
  // As the simulator groups them: one all-reduce per tensor-parallel rank of the smallest replica
  // (here the first's, times the ranks sharing a node's NICs when the group crosses nodes).
  std::vector<const plan::Replica*> all;
  for (int s : {a, b})
    for (const auto& r : p.stages[s].replicas) all.push_back(&r);
  const auto [group, share, tp] = first_slot(all);
  const double bytes = static_cast<double>(m_.ops[m_.tied_reader()].tied_params) *
                       model::dtype_bytes(m_.dtype) * share;
  const auto key = std::make_tuple(group, bytes);
  auto it = tied_.find(key);
  if (it != tied_.end()) return it->second;
  cost::CollectiveRequest req;
  req.kind = cost::Collective::all_reduce;
  req.devices = group;
  req.bytes = Bytes(bytes);
  const double t = cost::collective_cost(c_, req, opts_.sim.network).time.value;
  return tied_.emplace(key, t * nic_sharing(group, tp)).first->second;
}

Estimate Estimator::estimate(const plan::Plan& p) const { return *estimate_unless(p, nullptr); }

std::optional<Estimate> Estimator::estimate_unless(
    const plan::Plan& p,
    const std::function<bool(double time_at_least_s, double max_peak_bytes)>& unwanted) const {
  Estimate e;
  const int S = static_cast<int>(p.stages.size());
  const double m = p.num_microbatches;
  const double mb_samples = static_cast<double>(p.global_batch) / m;
  std::vector<double> stage_fwd(S, 0), stage_bwd(S, 0), sync_after(S, 0), stage_opt(S, 0),
      boundary(S, 0), gather(S, 0), pass_gather(S, 0), slice_reduce(S, 0), reduced(S, 0);
  for (int s = 0; s < S; ++s) {
    const auto& st = p.stages[s];
    const int dp = static_cast<int>(st.replicas.size());
    double fwd = 0, bwd = 0, opt = 0;
    const plan::Replica* last = nullptr;  // the last replica costed
    for (const auto& r : st.replicas) {
      // A replica like the last one costed takes its times and memory: nothing changes.
      if (last && r.batch_share == last->batch_share && same_replica_class(c_, r, *last)) continue;
      last = &r;
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
    stage_fwd[s] = fwd;
    stage_bwd[s] = bwd;
    stage_opt[s] = opt;
  }
  // Every stage runs its m forward and backward passes one after another.
  if (unwanted) {
    double slowest = 0;
    for (int s = 0; s < S; ++s) slowest = std::max(slowest, stage_fwd[s] + stage_bwd[s]);
    if (unwanted(std::max(1.0, m) * slowest, e.max_peak_bytes)) return std::nullopt;
  }
  for (int s = 0; s < S; ++s) {
    const auto& st = p.stages[s];
    const double bwd = stage_bwd[s];
    if (s + 1 < S) boundary[s] = boundary_time(p, s);
    // The stage's gradient synchronisation overlaps its last backward pass; ZeRO 1 and 2 gather
    // the updated parameters after the step, unless the next iteration's first forward pass
    // hides the gather.
    const SyncTime sync = sync_time(p, st.first_layer, st.num_layers, st.replicas);
    sync_after[s] = std::max(0.0, sync.reduce - bwd);
    if (p.zero_stage >= 2) slice_reduce[s] = sync.reduce;
    // ZeRO-3's gathers share the replicas' links with those reduces: half a reduce per pass.
    if (p.zero_stage == 3)
      pass_gather[s] = sync.gather + (m > 1 ? sync.reduce * (m - 1) / (2 * m) : 0.0);
    else if (!plan::overlaps_param_gather(p.overlap))
      gather[s] = sync.gather;
  }
  std::vector<double> synced(S);  // when each stage's last backward pass ends, then its sync
  if (p.schedule == plan::Schedule::interleaved) {
    // The first micro-batch's forward passes and the last one's backward passes cross every
    // stage and boundary once; in between, the pipeline runs at its slowest part's pace.
    double sum = 0, worst = 0;
    for (int s = 0; s < S; ++s) {
      sum += stage_fwd[s] + stage_bwd[s] + 2 * boundary[s];
      worst = std::max({worst, stage_fwd[s] + stage_bwd[s], boundary[s]});
    }
    const double pipe = sum + (m - 1) * worst;
    double before = 0;
    for (int s = 0; s < S; ++s) {
      synced[s] = pipe - before;
      before += stage_bwd[s];
      // ZeRO-2 and -3: the backward passes before the last end at that pace; their reduces
      // follow one another from the first's end.
      if (m > 1 && slice_reduce[s] > 0)
        reduced[s] = synced[s] - worst +
                     std::max(slice_reduce[s], (m - 1) * (slice_reduce[s] - worst) + worst);
    }
  } else {
    synced = pipeline_finish_times(p.schedule, p.num_microbatches, stage_fwd, stage_bwd, boundary,
                                   pass_gather, slice_reduce, &reduced);
  }
  // ZeRO-2 and -3 reduce-scatter every micro-batch's gradients (the simulator's
  // add_gradient_sync), the last one's while its backward pass runs, after the others'.
  for (int s = 0; s < S; ++s)
    synced[s] = std::max(synced[s] + sync_after[s], reduced[s] + slice_reduce[s]);
  // A tied LM head away from its word embedding: the two copies' gradients are summed once both
  // stages have synchronised, before either steps.
  if (const auto [a, b] = tied_stages(p); a >= 0 && b >= 0 && a != b) {
    const double t = std::max(synced[a], synced[b]) + tied_sync_time(p, a, b);
    synced[a] = synced[b] = t;
  }
  double end = 0;
  for (int s = 0; s < S; ++s) end = std::max(end, synced[s] + stage_opt[s] + gather[s]);
  // The host's time between steps, on the slowest of the plan's devices (as the simulator).
  const cost::ComputeCostModel compute(opts_.sim.compute, opts_.sim.profile);
  double between = 0;
  for (const auto& st : p.stages)
    for (const auto& r : st.replicas)
      for (int d : r.devices)
        between = std::max(between, compute.iteration_host_time(c_.type_of(d)).value);
  e.time_s = end + between;
  return e;
}

std::vector<double> pipeline_finish_times(plan::Schedule schedule, int microbatches,
                                          const std::vector<double>& fwd,
                                          const std::vector<double>& bwd,
                                          const std::vector<double>& boundary,
                                          const std::vector<double>& pass_gather,
                                          const std::vector<double>& slice_reduce,
                                          std::vector<double>* reduced) {
  const int S = static_cast<int>(fwd.size());
  const int M = std::max(1, microbatches);
  // Stage s's idx-th pass in sim::pass_order, worked out in place for GPipe and 1F1B (this runs
  // for every candidate a planner estimates); other schedules read the order.
  std::vector<std::vector<sim::PassRef>> orders;
  if (schedule != plan::Schedule::gpipe && schedule != plan::Schedule::one_f_one_b)
    for (int s = 0; s < S; ++s) orders.push_back(sim::pass_order(schedule, 1, s, S, M));
  auto pass = [&](int s, int idx) -> sim::PassRef {
    if (!orders.empty()) return orders[s][idx];
    if (schedule == plan::Schedule::gpipe)
      return idx < M ? sim::PassRef{0, idx, true} : sim::PassRef{0, idx - M, false};
    const int warmup = std::min(S - s - 1, M);
    if (idx < warmup) return {0, idx, true};
    const int j = idx - warmup, steady = 2 * (M - warmup);
    if (j < steady)
      return j % 2 ? sim::PassRef{0, j / 2, false} : sim::PassRef{0, warmup + j / 2, true};
    return {0, j - (M - warmup), false};
  };
  const int passes = 2 * M;  // per stage
  const std::size_t total = static_cast<std::size_t>(S) * passes;
  constexpr double kNotYet = -1;
  // Per stage and micro-batch (at s * M + k): when its activations (from stage s - 1) and its
  // gradient (from stage s + 1; the last stage's own forward pass) are there.
  std::vector<double> acts(total / 2, kNotYet), grads(total / 2, kNotYet);
  for (int k = 0; k < M; ++k) acts[k] = 0;
  std::vector<double> clock(S, 0), down_free(S, 0), up_free(S, 0), chain(S, 0);
  std::vector<int> next(S, 0);
  for (std::size_t done = 0; done < total;) {
    const std::size_t before = done;
    for (int s = 0; s < S; ++s)
      for (; next[s] < passes; ++next[s], ++done) {
        const sim::PassRef p = pass(s, next[s]);
        const int k = p.microbatch;
        const std::size_t at = static_cast<std::size_t>(s) * M + k;
        const double ready = p.forward ? acts[at] : grads[at];
        if (ready == kNotYet) break;
        double start = std::max(clock[s], ready);
        if (!pass_gather.empty()) start = std::max(start, (next[s] + 1) * pass_gather[s]);
        clock[s] = start + (p.forward ? fwd[s] : bwd[s]);
        if (!p.forward && !slice_reduce.empty() && k != M - 1)
          chain[s] = std::max(chain[s], clock[s]) + slice_reduce[s];
        if (p.forward && s + 1 == S) {
          grads[at] = clock[s];
        } else if (p.forward) {
          down_free[s] = std::max(down_free[s], clock[s]) + boundary[s];
          acts[at + M] = down_free[s];
        } else if (s > 0) {
          up_free[s - 1] = std::max(up_free[s - 1], clock[s]) + boundary[s - 1];
          grads[at - M] = up_free[s - 1];
        }
      }
    if (done == before) break;  // the orders wait on each other (none of the simulator's do)
  }
  if (reduced) *reduced = chain;
  return clock;
}

}  // namespace hetplan::search
