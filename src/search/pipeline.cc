// Pipeline partitioning over unlike device groups (in the manner of Metis, AMP and Sailor).
//
// A shape orders some of the device groups and cuts each into s_g equal stages of contiguous
// devices (whole nodes, or equal parts of one node), each stage a set of tensor-parallel replicas
// of degree tp_g inside a node. For each shape, micro-batch count and memory setting (recompute,
// ZeRO-1), a dynamic program over (stage, layers so far) places contiguous layer ranges on the
// stages: a stage may take layers [a, b) only if they fit its devices' memory with the
// micro-batches 1F1B keeps in flight there, and the program minimises the pipeline time
// (m - 1) * max_s max(T_s, C_s) + sum_s (T_s + 2 C_s), T_s a stage's forward and backward time
// per micro-batch and C_s its boundary's transfer of one micro-batch one way, which overlaps the
// stages' passes (tracked as the pair (max, sum) per state). Slow groups thus get fewer layers,
// so stages finish together. Recompute modes are tried cheapest first (see
// try_shape). The best plans by estimate are simulated.
//
// Mixed shapes (SearchOptions::mixed_stages) turn this sideways, as Sailor does: each chosen group
// is cut into the same S parts and stage s holds part s of every group, its replicas' batch shares
// proportional to their peak FLOP/s (whole samples per micro-batch). The same DP places the layers,
// a stage's time per layer being its slowest kind of replica's and its memory limit every kind's.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <thread>
#include <tuple>
#include <type_traits>
#include <unordered_map>

#include "hetplan/core/hash.h"
#include "hetplan/cost/memory_cost.h"
#include "hetplan/search/device_groups.h"
#include "hetplan/search/planners.h"
#include "layer_placements.h"
#include "search_space.h"

namespace hetplan::search {
namespace {

constexpr double kInfTime = std::numeric_limits<double>::infinity();
constexpr std::size_t kFrontierCells = 12;  // per DP state, the most (time, memory) points kept
// The frontier's lower bounds on a placement's time and peak are sums taken in another order than
// the estimator's, so round differently: they give way by far more.
constexpr double kBoundRounding = 1 - 1e-9;

// A hash of the cost tables' keys (tuples of numbers).
struct KeyHash {
  template <class... T>
  std::size_t operator()(const std::tuple<T...>& key) const {
    std::size_t h = kHashSeed;
    std::apply(
        [&](const auto&... x) {
          ((h = hash_mix(h, std::hash<std::decay_t<decltype(x)>>{}(x))), ...);
        },
        key);
    return h;
  }
};

struct StageResources {
  // Stages of one kind cost alike and share cost tables: a group's index, or for a stage that
  // spans groups, an id of its composition (groups, stages per group, tp) above the groups'.
  int kind = 0;
  int tp = 1;
  std::vector<plan::Replica> replicas;  // with their batch shares
  // A stage spanning groups: the first replica of each group in it (one of each kind of
  // replica); empty for a stage of one group, whose replicas are all alike (with even shares, or
  // whole samples shared as evenly as they go, the first replicas taking one more).
  std::vector<std::size_t> representatives;
};

struct GroupCut {
  int stages = 1;
  int tp = 1;
};

// Ways to cut one group into equal stages with a tensor-parallel degree that splits m's heads,
// key/value heads and experts evenly.
std::vector<GroupCut> group_cuts(const DeviceGroup& g, const model::Model& m, int max_stages) {
  std::vector<GroupCut> out;
  const int n = g.size(), dpn = g.devices_per_node;
  for (int s = 1; s <= std::min(n, max_stages); ++s) {
    if (n % s) continue;
    const int chunk = n / s;
    if (!(chunk <= dpn ? dpn % chunk == 0 : chunk % dpn == 0)) continue;
    for (int tp : powers_of_two(std::min({8, dpn, chunk}))) {
      if (dpn % tp || chunk % tp || !even_tp_splits(m, tp)) continue;
      out.push_back({s, tp});
    }
  }
  return out;
}

std::vector<std::vector<int>> group_orders(const cluster::Cluster& c,
                                           const std::vector<DeviceGroup>& groups,
                                           model::DType dt) {
  const int k = static_cast<int>(groups.size());
  std::vector<std::vector<int>> out;
  if (k <= 3) {
    for (int mask = 1; mask < (1 << k); ++mask) {
      std::vector<int> sub;
      for (int g = 0; g < k; ++g)
        if (mask & (1 << g)) sub.push_back(g);
      do out.push_back(sub);
      while (std::next_permutation(sub.begin(), sub.end()));
    }
    return out;
  }
  // Many groups: every group, ordered by memory (largest first) and by speed (fastest first).
  std::vector<int> all(k);
  std::iota(all.begin(), all.end(), 0);
  auto by_memory = all, by_speed = all;
  std::stable_sort(by_memory.begin(), by_memory.end(), [&](int a, int b) {
    return c.device_types[groups[a].type].memory > c.device_types[groups[b].type].memory;
  });
  std::stable_sort(by_speed.begin(), by_speed.end(), [&](int a, int b) {
    return c.device_types[groups[a].type].peak(dt) > c.device_types[groups[b].type].peak(dt);
  });
  out.push_back(by_memory);
  if (by_speed != by_memory) out.push_back(by_speed);
  return out;
}

struct Settings {
  cost::Recompute recompute;
  int zero;
};

class PipelinePlanner {
 public:
  PipelinePlanner(const Context& ctx, FrontierPool* frontier)
      : ctx_(ctx),
        groups_(device_groups(ctx.cluster)),
        L_(static_cast<int>(ctx.model.layers.size())),
        table_layer_(cost::tied_table_layer(ctx.model)),
        no_comm_(L_, 0.0),
        pool_(ctx, "pipeline"),
        mixed_pool_(ctx, "pipeline"),
        frontier_(frontier) {}

  // ZeRO stages 0 and 1 first; 2 and 3 (gradients, then parameters sharded too) in a second pass
  // where no candidate of the first fits. The frontier tries all four in one pass, for its
  // low-memory end.
  PlannerOutput run() {
    if (frontier_) zeros_ = {0, 1, 2, 3};
    shapes();
    if (!frontier_ && !pool_.any_fits() && !ctx_.deadline.expired()) {
      zeros_ = {2, 3};
      shapes();
    }
    PlannerOutput out = finish();
    if (!frontier_ && out.estimated == 0 && !ctx_.deadline.expired())
      out.best.error =
          divisible_
              ? "no pipeline shape's layers fit in its devices' memory (with every recomputation "
                "setting and ZeRO stages 0 to 3)"
              : fmt::format(
                    "the global batch {} splits in no pipeline shape: each micro-batch must "
                    "give every replica of a stage at least one sample, and a shape of more "
                    "than one stage needs at least as many micro-batches as stages{}",
                    ctx_.options.global_batch, tp_limit());
    return out;
  }

 private:
  // For the message when no shape divides the batch: the tensor-parallel degrees the model's
  // heads allow, where they rule some out.
  std::string tp_limit() const {
    std::vector<int> allowed;
    for (int tp : powers_of_two(8))
      if (even_tp_splits(ctx_.model, tp)) allowed.push_back(tp);
    if (allowed.size() == powers_of_two(8).size()) return "";
    const model::Model& m = ctx_.model;
    return fmt::format(
        "; tensor-parallel degrees {} only (powers of two up to 8 dividing the model's {} "
        "attention heads, {} key/value heads{})",
        fmt::join(allowed, ", "), m.heads, m.kv_heads,
        m.experts > 0 ? fmt::format(" and {} experts", m.experts) : "");
  }

  // Each pool's best simulated; plans spanning types are ranked apart from the others, so that
  // estimates of theirs cannot push a one-type plan out: the planner with mixed stages is never
  // slower than without (barring the deadline).
  PlannerOutput finish() {
    PlannerOutput out = pool_.finish();
    PlannerOutput mixed = mixed_pool_.finish();
    out.estimated += mixed.estimated;
    out.timed_out = out.timed_out || mixed.timed_out;
    if (mixed.best.ok && (!out.best.ok || better(mixed.best, out.best, ctx_.options.objective)))
      out.best = mixed.best;
    out.simulated.insert(out.simulated.end(), mixed.simulated.begin(), mixed.simulated.end());
    std::stable_sort(out.simulated.begin(), out.simulated.end(),
                     [&](const Evaluation& a, const Evaluation& b) {
                       return better(a, b, ctx_.options.objective);
                     });
    return out;
  }

  void shapes() {
    const int max_stages = std::min({L_, block_count(ctx_.model) + 2, 32});
    for (const auto& order : group_orders(ctx_.cluster, groups_, ctx_.model.dtype)) {
      std::vector<std::vector<GroupCut>> cuts;
      for (int g : order) cuts.push_back(group_cuts(groups_[g], ctx_.model, max_stages));
      std::vector<GroupCut> chosen(order.size());
      std::function<bool(std::size_t, int)> rec = [&](std::size_t i, int stages) -> bool {
        if (i == order.size()) return try_shape(order, chosen);
        for (const auto& cut : cuts[i]) {
          if (stages + cut.stages > max_stages) continue;
          chosen[i] = cut;
          if (!rec(i + 1, stages + cut.stages)) return false;
        }
        return true;
      };
      if (!rec(0, 0)) break;
    }
    if (ctx_.options.mixed_stages) mixed_shapes(max_stages);
  }

  // Shapes whose stages span device groups (as Sailor allows): each chosen group cut into S equal
  // parts, stage s made of part s of every group, its replicas' batch shares proportional to
  // their peak FLOP/s. Every set of two or more groups (all groups when there are more than
  // four), one tensor-parallel degree for the whole stage.
  void mixed_shapes(int max_stages) {
    const int k = static_cast<int>(groups_.size());
    if (k < 2) return;
    std::vector<std::vector<int>> sets;
    if (k <= 4) {
      for (int mask = 1; mask < (1 << k); ++mask) {
        if (std::popcount(static_cast<unsigned>(mask)) < 2) continue;
        std::vector<int> set;
        for (int g = 0; g < k; ++g)
          if (mask & (1 << g)) set.push_back(g);
        sets.push_back(std::move(set));
      }
    } else {
      sets.emplace_back(k);
      std::iota(sets.back().begin(), sets.back().end(), 0);
    }
    for (const auto& set : sets)
      for (int S = 1; S <= max_stages; ++S)
        for (int tp : {1, 2, 4, 8}) {
          bool ok = true;
          for (int g : set) {
            const auto cuts = group_cuts(groups_[g], ctx_.model, max_stages);
            ok = ok && std::any_of(cuts.begin(), cuts.end(),
                                   [&](const GroupCut& c) { return c.stages == S && c.tp == tp; });
          }
          if (ok && !try_mixed_shape(set, S, tp)) return;
        }
  }

  // False once the deadline has passed.
  bool try_mixed_shape(const std::vector<int>& set, int S, int tp) {
    if (S > L_) return true;
    const std::vector<int> composition = [&] {
      std::vector<int> key{S, tp};
      key.insert(key.end(), set.begin(), set.end());
      return key;
    }();
    auto [kind_it, added] = mixed_kinds_.try_emplace(
        composition, static_cast<int>(groups_.size() + mixed_kinds_.size()));
    std::vector<StageResources> stages(S);
    for (int s = 0; s < S; ++s) {
      stages[s].kind = kind_it->second;
      stages[s].tp = tp;
    }
    for (int g : set) {
      const auto devices = groups_[g].devices();
      const std::size_t chunk = devices.size() / S;
      for (int s = 0; s < S; ++s) {
        std::vector<int> part(devices.begin() + s * chunk, devices.begin() + (s + 1) * chunk);
        auto replicas = tp_replicas(ctx_.cluster, part, tp);
        if (replicas.empty()) return true;
        stages[s].representatives.push_back(stages[s].replicas.size());
        stages[s].replicas.insert(stages[s].replicas.end(), replicas.begin(), replicas.end());
      }
    }
    const std::size_t dp = stages.front().replicas.size();
    std::vector<double> weights;
    for (const auto& r : stages.front().replicas) {
      double peak = 0;
      for (int d : r.devices) peak += device_peak(ctx_.cluster, d, ctx_.model.dtype);
      weights.push_back(peak);
    }
    const std::int64_t B = ctx_.options.global_batch;
    std::vector<int> tried;
    for (int u : {1, 2, 4, 8}) {
      // The most micro-batches that give each a whole number of samples, about u per replica.
      int m = static_cast<int>(B / (static_cast<std::int64_t>(u) * static_cast<std::int64_t>(dp)));
      while (m > 0 && B % m) --m;
      if (m < 1 || (S > 1 && m < S)) continue;
      if (std::find(tried.begin(), tried.end(), m) != tried.end()) continue;
      tried.push_back(m);
      divisible_ = true;
      // Every replica keeps at least one sample per micro-batch: each kind must be represented.
      const auto samples = proportional_split(weights, B / m);
      if (std::find(samples.begin(), samples.end(), 0) != samples.end()) continue;
      for (auto& st : stages)
        for (std::size_t r = 0; r < dp; ++r)
          st.replicas[r].batch_share = static_cast<double>(samples[r]) / static_cast<double>(B / m);
      if (!try_settings(stages, m, dp)) return false;
    }
    return true;
  }

  // False once the deadline has passed.
  bool try_shape(const std::vector<int>& order, const std::vector<GroupCut>& cuts) {
    std::vector<StageResources> stages;
    for (std::size_t i = 0; i < order.size(); ++i) {
      const auto devices = groups_[order[i]].devices();
      const std::size_t chunk = devices.size() / cuts[i].stages;
      for (int s = 0; s < cuts[i].stages; ++s) {
        std::vector<int> part(devices.begin() + s * chunk, devices.begin() + (s + 1) * chunk);
        StageResources st{order[i], cuts[i].tp, tp_replicas(ctx_.cluster, part, cuts[i].tp), {}};
        if (st.replicas.empty()) return true;
        for (auto& r : st.replicas) r.batch_share = 1.0 / static_cast<double>(st.replicas.size());
        stages.push_back(std::move(st));
      }
    }
    const int S = static_cast<int>(stages.size());
    if (S > L_) return true;
    std::size_t dp_max = 0;
    for (const auto& st : stages) dp_max = std::max(dp_max, st.replicas.size());
    const std::int64_t B = ctx_.options.global_batch;
    bool even = false;
    for (int u : {1, 2, 4, 8}) {
      if (B % (static_cast<std::int64_t>(u) * static_cast<std::int64_t>(dp_max))) continue;
      const int m = static_cast<int>(B / (u * static_cast<std::int64_t>(dp_max)));
      if (S > 1 && m < S) continue;
      divisible_ = even = true;
      if (!try_settings(stages, m, dp_max)) return false;
    }
    if (even) return true;
    // No micro-batch count gives every replica the same samples: the replicas of each stage
    // share each micro-batch's samples as evenly as whole samples allow (the first ones one
    // more), about u per replica of the widest stage.
    std::vector<int> tried;
    for (int u : {1, 2, 4, 8}) {
      int m =
          static_cast<int>(B / (static_cast<std::int64_t>(u) * static_cast<std::int64_t>(dp_max)));
      while (m > 0 && B % m) --m;
      if (m < 1 || (S > 1 && m < S)) continue;
      if (std::find(tried.begin(), tried.end(), m) != tried.end()) continue;
      tried.push_back(m);
      divisible_ = true;
      for (auto& st : stages) {
        const auto samples =
            proportional_split(std::vector<double>(st.replicas.size(), 1.0), B / m);
        for (std::size_t r = 0; r < samples.size(); ++r)
          st.replicas[r].batch_share = static_cast<double>(samples[r]) / static_cast<double>(B / m);
      }
      if (!try_settings(stages, m, dp_max)) return false;
    }
    return true;
  }

  // The layer DP for one shape and micro-batch count under each recompute mode and ZeRO stage
  // (ZeRO only with a stage of two replicas or more). More recomputation only adds time at a
  // given micro-batch size, so the first mode that fits is the last one worth trying. ZeRO-1
  // changes time both ways (it shards the optimizer step but splits the all-reduce in two), so
  // both stages are tried. False once the deadline has passed and there is a candidate to
  // simulate (the search returns the best found by then, so it goes on until it has one).
  bool try_settings(const std::vector<StageResources>& stages, int m, std::size_t dp_max) {
    // The boundaries' transfers depend on the shape and micro-batch size only.
    const int S = static_cast<int>(stages.size());
    const double per_microbatch = static_cast<double>(ctx_.options.global_batch) / m;
    std::vector<const std::vector<double>*> comm(S);
    for (int s = 0; s < S; ++s)
      comm[s] = s + 1 < S ? &comm_table(stages[s], stages[s + 1], per_microbatch) : &no_comm_;
    for (auto rc : recompute_modes(ctx_.model)) {
      bool placed = false;
      for (int zero : zeros_) {
        if (out_of_time(ctx_) && (frontier_ || !pool_.empty() || !mixed_pool_.empty()))
          return false;
        if (zero >= 1 && dp_max == 1) continue;
        placed = place_layers(stages, m, comm, Settings{rc, zero}) || placed;
      }
      if (placed && !frontier_) break;  // the frontier wants the costlier, smaller ones too
    }
    return true;
  }

  // The layer DP for one shape and setting; offers the plan and returns whether it fitted (for
  // the frontier, which asks no answer of it, false may also mean that the pool refuses every
  // placement, and true that it refused the shape).
  bool place_layers(const std::vector<StageResources>& stages, int m,
                    const std::vector<const std::vector<double>*>& comm, Settings set) {
    const int S = static_cast<int>(stages.size());
    plan::Plan settings = base_plan(ctx_, "pipeline");
    settings.recompute = set.recompute;
    settings.zero_stage = set.zero;
    settings.num_microbatches = m;
    const double B = static_cast<double>(ctx_.options.global_batch);
    // Per stage: prefix sums of per-layer time, memory reach (and comm, the boundary cost after
    // each layer). Stages cut from one group alike share these tables, so they are cached across
    // shapes, and a stage like the one before takes its table without a lookup.
    auto like_the_one_before = [&](int s) {
      return s > 0 && settings_key(settings, stages[s - 1], B / m) ==
                          settings_key(settings, stages[s], B / m);
    };
    std::vector<const std::vector<double>*> prefix(S);
    StageReach reach(S);
    std::vector<MemoryMatrix*> memory(S);
    for (int s = 0; s < S; ++s)
      prefix[s] =
          like_the_one_before(s) ? prefix[s - 1] : &prefix_table(settings, stages[s], B / m);
    // A lower bound: every layer runs at least as fast as on its fastest stage, the stages share
    // the work at best evenly, so max_s T_s >= W / S and sum_s T_s >= W. Shapes that cannot beat
    // the candidates kept so far are skipped (more recomputation only raises the bound, so the
    // caller may stop here too).
    CandidatePool& pool = stages.front().representatives.empty() ? pool_ : mixed_pool_;
    if (!frontier_) {
      fastest_layers(prefix);
      const double W = fastest_[L_];
      if ((m - 1) * W / S + W > pool.threshold_s()) return true;
    }
    MemoryMatrices* family = nullptr;
    for (int s = 0; s < S; ++s) {
      if (!like_the_one_before(s)) family = &memory_[settings_key(settings, stages[s], B / m)];
      memory[s] = &memory_matrix(*family, settings, stages[s], B / m, std::min(m, S - s));
      reach[s] = &memory[s]->reach;
    }
    auto stage_mem = [&](int s, int a, int b) { return memory[s]->at(a, b); };
    // The frontier skips a shape none of whose placements could enter it (stages spanning groups
    // are not bounded: their table takes the slowest kind per layer, which can exceed every
    // kind's sum).
    const bool bounded = frontier_ && stages.front().representatives.empty();
    if (bounded) switch (frontier_verdict(S, m, prefix, reach, memory)) {
        case Verdict::none_fits:
          return false;
        case Verdict::refused:
          return true;
        case Verdict::may_enter:
          break;
      }
    // DP over (stage s, layers placed i): per state the placements' (max, sum) of stage times and
    // peak memory, keeping one (the best score) or, for the frontier, an epsilon-Pareto set of
    // (score, memory).
    auto cell = [&](double mx, double sum, double mem, int from_a, int from_k, double compute,
                    double least) {
      return Cell{mx, sum, mem, (m - 1) * mx + sum, from_a, from_k, compute, least};
    };
    // A cell whose every completion the pool would refuse, by its least time (below) and its
    // largest peak so far, is dropped. Kept, it would have pushed out of its state's
    // set the cells within epsilon of it and those it dominates, which the DP now keeps instead:
    // the frontier can differ, within epsilon of the one without the drop on the cases compared.
    auto refused = [&](const Cell& c) {
      return bounded &&
             frontier_->peak_excluded(frontier_->peak_bars()(c.least_time * kBoundRounding),
                                      c.mem * kBoundRounding);
    };
    const bool pareto = frontier_ != nullptr;
    const double eps = pareto ? frontier_->epsilon : 0;
    // Whether a cell within epsilon of c on both counts is kept: c, or a cell no better than c on
    // either count, would not be.
    auto rejects = [&](const std::vector<Cell>& cells, const Cell& c) {
      const double score_bar = c.score * (1 + eps), mem_bar = c.mem * (1 + eps);
      return std::any_of(cells.begin(), cells.end(),
                         [&](const Cell& o) { return o.score <= score_bar && o.mem <= mem_bar; });
    };
    auto insert = [&](std::vector<Cell>& cells, const Cell& c) {
      if (!pareto) {
        if (cells.empty() || c.score < cells[0].score) cells.assign(1, c);
        return;
      }
      if (rejects(cells, c) || refused(c)) return;
      std::erase_if(cells, [&](const Cell& o) { return c.score <= o.score && c.mem <= o.mem; });
      cells.push_back(c);
      if (cells.size() > kFrontierCells) {
        std::sort(cells.begin(), cells.end(),
                  [](const Cell& x, const Cell& y) { return x.score < y.score; });
        cells.resize(kFrontierCells);
      }
    };
    // Cells of (s, i) at s * (L + 1) + i, kept across calls so that their storage is reused.
    if (cells_.size() < static_cast<std::size_t>(S) * (L_ + 1))
      cells_.resize(static_cast<std::size_t>(S) * (L_ + 1));
    for (std::size_t k = 0; k < static_cast<std::size_t>(S) * (L_ + 1); ++k) cells_[k].clear();
    auto best = [&](int s, int i) -> std::vector<Cell>& {
      return cells_[static_cast<std::size_t>(s) * (L_ + 1) + i];
    };
    // A stage's passes and its boundary's transfers overlap: the pipeline's pace is the slower of
    // a stage's compute and a boundary's transfer one way (each direction has its own), and the
    // first micro-batch's way down and the last one's way back pay both.
    for (int i = 1; i <= L_ && i <= (*reach[0])[0]; ++i) {
      const double t = (*prefix[0])[i], c = (*comm[0])[i - 1];
      insert(best(0, i),
             cell(std::max(t, c / 2), t + c, pareto ? stage_mem(0, 0, i) : 0, 0, 0, t, m * t));
    }
    for (int s = 1; s < S; ++s)
      for (int a = s; a < L_; ++a) {
        const auto& prev = best(s - 1, a);
        if (prev.empty()) continue;
        // The least of each count over the predecessors: a cell made of them bounds every
        // extension of theirs below, so what refuses or rejects it refuses or rejects them all.
        Cell least = prev.front();
        if (pareto)
          for (const Cell& pc : prev) {
            least.mx = std::min(least.mx, pc.mx);
            least.sum = std::min(least.sum, pc.sum);
            least.mem = std::min(least.mem, pc.mem);
            least.compute = std::min(least.compute, pc.compute);
            least.least_time = std::min(least.least_time, pc.least_time);
          }
        const int last_i = s + 1 == S ? L_ : L_ - (S - 1 - s);
        for (int i = a + 1; i <= std::min((*reach[s])[a], last_i); ++i) {
          const double t = (*prefix[s])[i] - (*prefix[s])[a], c = (*comm[s])[i - 1];
          const double mem = pareto ? stage_mem(s, a, i) : 0;
          if (pareto) {
            const Cell lower =
                cell(std::max({least.mx, t, c / 2}), least.sum + t + c, std::max(least.mem, mem), a,
                     0, least.compute + t, std::max(least.least_time, least.compute + m * t));
            // A longer stage only takes longer and holds more (unless it may yet take in the
            // tied table): once refused, the rest of this stage's ends are too.
            if (refused(lower)) {
              if (table_layer_ < i) break;
              continue;
            }
            if (prev.size() > 1 && rejects(best(s, i), lower)) continue;
          }
          for (std::size_t k = 0; k < prev.size(); ++k) {
            const Cell& pc = prev[k];
            insert(best(s, i), cell(std::max({pc.mx, t, c / 2}), pc.sum + t + c,
                                    std::max(pc.mem, mem), a, static_cast<int>(k), pc.compute + t,
                                    std::max(pc.least_time, pc.compute + m * t)));
          }
        }
      }
    const auto& ends = best(S - 1, L_);
    if (ends.empty()) return false;
    for (std::size_t k0 = 0; k0 < ends.size(); ++k0) {
      if (!pareto && ends[k0].score > pool.threshold_s()) continue;  // fits, but cannot win
      std::vector<int> cut(S + 1, 0);
      cut[S] = L_;
      int i = L_, k = static_cast<int>(k0);
      for (int s = S - 1; s >= 1; --s) {
        const Cell& c = best(s, i)[k];
        i = c.from_a;
        k = c.from_k;
        cut[s] = i;
      }
      plan::Plan p = settings;
      for (int s = 0; s < S; ++s) {
        plan::Stage st;
        st.first_layer = cut[s];
        st.num_layers = cut[s + 1] - cut[s];
        st.replicas = stages[s].replicas;
        p.stages.push_back(std::move(st));
      }
      if (pareto)
        frontier_->offer(std::move(p));
      else
        pool.offer(std::move(p));
    }
    return true;
  }

  // A state of the layer DP (stage s, layers placed i): the placements' (max, sum) of stage times
  // and peak memory, their pipeline time (m - 1) * mx + sum, and the predecessor state
  // (s - 1, from_a), its from_k-th cell.
  struct Cell {
    double mx, sum, mem, score;
    int from_a, from_k;
    double compute;  // the sum of the stages' times alone (no transfer)
    // A lower bound on the estimated time of every placement that completes this one: the
    // estimator's pipeline is a schedule (stage k's first forward pass waits for the stages
    // before, its m forward and backward passes run one after another, and the last one's
    // gradient goes back through the stages before), so it takes at least, for every stage k,
    // the stages before k's passes once plus m times stage k's passes.
    double least_time;
  };

  // Peak memory of a device of one kind of stage holding layers [a, b) (for a stage spanning
  // groups, the largest of its kinds of replica), and reach[a]: the largest b with [a, b) fitting
  // every device (a when not even one layer fits).
  struct MemoryMatrix {
    std::vector<cost::StageMemoryTable> kinds;  // one per kind of replica
    std::vector<double> capacity;               // its first device's memory
    std::vector<int> reach;
    // reach_under(bar, pool): the largest b with [a, b) fitting and a peak the pool does not
    // exclude at that bar (memory grows with the stage, so it never decreases with a either; no
    // tied table past layer 0). The last few bars' are kept: the pool changes far less often
    // than it is asked.
    const std::vector<int>& reach_under(double bar, const FrontierPool& pool) {
      for (std::size_t k = 0; k < under_bars.size(); ++k)
        if (under_bars[k] == bar) return unders[k];
      std::size_t k = next_under;
      if (under_bars.size() < kUnderBars) {
        k = under_bars.size();
        under_bars.push_back(bar);
        unders.emplace_back();
      } else {
        under_bars[k] = bar;
        next_under = (next_under + 1) % kUnderBars;
      }
      auto& u = unders[k];
      u.assign(reach.size(), 0);
      for (std::size_t a = 0; a < reach.size(); ++a) {
        int b = std::max(static_cast<int>(a), a > 0 ? u[a - 1] : 0);
        while (b < reach[a] &&
               !pool.peak_excluded(bar, at(static_cast<int>(a), b + 1) * kBoundRounding))
          ++b;
        u[a] = b;
      }
      return u;
    }
    static constexpr std::size_t kUnderBars = 4;
    std::vector<double> under_bars;
    std::vector<std::vector<int>> unders;
    std::size_t next_under = 0;
    double at(int a, int b) const {
      double peak = 0;
      for (const auto& t : kinds) peak = std::max(peak, t.at(a, b - a).total().value);
      return peak;
    }
    bool fits(int a, int b) const {
      for (std::size_t k = 0; k < kinds.size(); ++k)
        if (kinds[k].at(a, b - a).total().value > capacity[k]) return false;
      return true;
    }
  };
  enum class Verdict { none_fits, refused, may_enter };

  // Whether some placement of a shape of stages of one group each could enter the frontier pool,
  // by bounds on the placements' estimates. A placement's estimate takes at least, for each stage
  // k, the stages before k's forward and backward passes once and m times stage k's
  // (Cell::least_time), so at least W(a) + m T_k, with W(a) the time of layers [0, a) each on its
  // fastest stage of the shape and a stage k's first layer; its peak is at least its largest
  // stage's. The pool refuses a placement whose peak is not under the bar of its time: take the
  // least time bound t over the placements, and the bar of t; if no placement has every stage
  // under that bar, every placement faster than the bar's next step is refused, and the question
  // goes on from the least time bound t' of those under the bar (when t' falls in the same step,
  // that placement may enter). The bars only fall as t grows, so this ends.
  Verdict frontier_verdict(int S, int m, const std::vector<const std::vector<double>*>& prefix,
                           const StageReach& reach, const std::vector<MemoryMatrix*>& memory) {
    fastest_layers(prefix);
    // With one more layer at its start, a stage's bound loses that layer's fastest time and gains
    // m times its own, no less: it grows with the stage, as least_slowest asks.
    auto least_time = [&](int s, int a, int b) {
      return fastest_[a] + m * ((*prefix[s])[b] - (*prefix[s])[a]);
    };
    double least = least_slowest(L_, S, reach, least_time, slowest_scratch_);
    if (least == kInfTime) return Verdict::none_fits;
    const auto& bars = frontier_->peak_bars();
    if (table_layer_ > 0) {
      // A stage may shed the tied table's copy as it grows, so the reach under a bar is not one
      // bound per first layer: only the first step is asked.
      const double bar = bars(least * kBoundRounding);
      const bool some =
          bar == kInfTime || any_placement(L_, S, reach, table_layer_, [&](int s, int a, int b) {
            return !frontier_->peak_excluded(bar, memory[s]->at(a, b) * kBoundRounding);
          });
      return some ? Verdict::may_enter : Verdict::refused;
    }
    for (;;) {
      const double bar = bars(least * kBoundRounding);
      if (bar == kInfTime) return Verdict::may_enter;
      under_.resize(S);
      for (int s = 0; s < S; ++s) under_[s] = &memory[s]->reach_under(bar, *frontier_);
      const double t = least_slowest(L_, S, under_, least_time, slowest_scratch_);
      if (t == kInfTime) return Verdict::refused;
      if (bars(t * kBoundRounding) == bar) return Verdict::may_enter;
      least = t;
    }
  }

  // fastest_[l]: the time of layers [0, l), each on its fastest stage of the shape (stages cut
  // from one group share their table: each table is asked once).
  void fastest_layers(const std::vector<const std::vector<double>*>& prefix) {
    tables_.assign(prefix.begin(), prefix.end());
    std::sort(tables_.begin(), tables_.end(), std::less<>());
    tables_.erase(std::unique(tables_.begin(), tables_.end()), tables_.end());
    fastest_.assign(L_ + 1, 0);
    for (int l = 0; l < L_; ++l) {
      double t = kInfTime;
      for (const auto* table : tables_) t = std::min(t, (*table)[l + 1] - (*table)[l]);
      fastest_[l + 1] = fastest_[l] + t;
    }
  }

  // (stage kind, tp, dp, samples per micro-batch over the stage, the first replica's share of
  // them, recompute, ZeRO stage). A stage's samples and replicas do not settle its shares: a
  // stage narrower than the shape's widest takes even fractional shares where a shape of it alone
  // shares whole samples unevenly.
  using SettingsKey = std::tuple<int, int, int, double, double, int, int>;

  SettingsKey settings_key(const plan::Plan& settings, const StageResources& st,
                           double per_microbatch) const {
    return {st.kind,
            st.tp,
            static_cast<int>(st.replicas.size()),
            per_microbatch,
            st.replicas.front().batch_share,
            static_cast<int>(settings.recompute),
            settings.zero_stage};
  }

  // One replica of each kind in the stage, with its samples per micro-batch.
  std::vector<std::pair<const plan::Replica*, double>> kinds_of(const StageResources& st,
                                                                double per_microbatch) const {
    std::vector<std::pair<const plan::Replica*, double>> out;
    if (st.representatives.empty()) {
      // Alike replicas: the first holds the largest share (of uneven whole samples).
      out.emplace_back(&st.replicas.front(), st.replicas.front().batch_share * per_microbatch);
      return out;
    }
    for (std::size_t r : st.representatives)
      out.emplace_back(&st.replicas[r], st.replicas[r].batch_share * per_microbatch);
    return out;
  }

  // Prefix sums over layers of a stage's forward and backward time per micro-batch: per layer,
  // its slowest kind of replica's.
  const std::vector<double>& prefix_table(const plan::Plan& settings, const StageResources& st,
                                          double per_microbatch) {
    auto [it, fresh] = prefix_.try_emplace(settings_key(settings, st, per_microbatch));
    if (fresh) {
      const int dp = static_cast<int>(st.replicas.size());
      std::vector<double> layer(L_, 0);
      for (const auto& [r, samples] : kinds_of(st, per_microbatch)) {
        const auto& t = ctx_.estimator.layer_costs(settings, *r, samples, dp);
        for (int l = 0; l < L_; ++l) layer[l] = std::max(layer[l], t.forward[l] + t.backward[l]);
      }
      it->second.assign(L_ + 1, 0);
      for (int l = 0; l < L_; ++l) it->second[l + 1] = it->second[l] + layer[l];
    }
    return it->second;
  }

  // Both directions' transfer of one micro-batch after each layer, from stage st to stage next
  // (between their first replicas; at the first one's samples, the largest share, in a stage of
  // alike replicas, and at st's mean samples per replica in one spanning groups).
  const std::vector<double>& comm_table(const StageResources& st, const StageResources& next,
                                        double per_microbatch) {
    const auto& from = st.replicas.front();
    const auto& to = next.replicas.front();
    const double samples = st.representatives.empty()
                               ? from.batch_share * per_microbatch
                               : per_microbatch / static_cast<double>(st.replicas.size());
    auto [it, fresh] = comm_.try_emplace(
        std::make_tuple(from.devices.front(), to.devices.front(),
                        std::min(from.devices.size(), to.devices.size()), samples));
    if (fresh) {
      it->second.resize(L_);
      for (int l = 0; l < L_; ++l)
        it->second[l] = 2 * ctx_.estimator.boundary_time(l, samples, from, to);
    }
    return it->second;
  }

  // One settings key's memory matrices, by micro-batches in flight (built when first asked, then
  // kept in place).
  using MemoryMatrices = std::vector<std::unique_ptr<MemoryMatrix>>;

  MemoryMatrix& memory_matrix(MemoryMatrices& family, const plan::Plan& settings,
                              const StageResources& st, double per_microbatch, int inflight) {
    if (family.size() <= static_cast<std::size_t>(inflight)) family.resize(inflight + 1);
    if (family[inflight]) return *family[inflight];
    family[inflight] = std::make_unique<MemoryMatrix>();
    MemoryMatrix& mm = *family[inflight];
    const int dp = static_cast<int>(st.replicas.size());
    for (const auto& [r, samples] : kinds_of(st, per_microbatch)) {
      mm.kinds.push_back(ctx_.estimator.memory_table(settings, *r, 0, dp, samples, inflight));
      mm.capacity.push_back(ctx_.cluster.type_of(r->devices.front()).memory.value);
    }
    mm.reach.assign(L_, 0);
    for (int a = 0; a < L_; ++a) {
      // [a, reach[a - 1]) is inside [a - 1, reach[a - 1]), so it fits too.
      int lo = a > 0 ? std::max(a, mm.reach[a - 1]) : a, hi = L_;
      while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (mm.fits(a, mid))
          lo = mid;
        else
          hi = mid - 1;
      }
      mm.reach[a] = lo;
    }
    return mm;
  }

  const Context& ctx_;
  std::vector<DeviceGroup> groups_;
  int L_;
  int table_layer_;              // the tied table's layer, -1 for none
  std::vector<double> no_comm_;  // the last stage sends nothing on
  // The cost tables, asked for once per stage of every shape and setting: hashed (an ordered map's
  // key comparisons took 15% of the frontier's time). Only looked up, never walked.
  std::unordered_map<SettingsKey, std::vector<double>, KeyHash> prefix_;
  std::unordered_map<std::tuple<int, int, std::size_t, double>, std::vector<double>, KeyHash> comm_;
  std::unordered_map<SettingsKey, MemoryMatrices, KeyHash> memory_;
  std::map<std::vector<int>, int> mixed_kinds_;  // composition of a stage spanning groups -> kind
  CandidatePool pool_;                           // plans whose stages are of one group each
  CandidatePool mixed_pool_;                     // plans with a stage spanning groups
  bool divisible_ = false;  // whether some shape split the global batch into micro-batches
  FrontierPool* frontier_ = nullptr;  // set: track the time/memory frontier instead of one best
  std::vector<int> zeros_{0, 1};      // the ZeRO stages this pass tries
  std::vector<std::vector<Cell>> cells_;  // place_layers' DP states
  // Storage kept across calls: fastest_layers' W (prefix sums) and the shape's distinct time
  // tables; frontier_verdict's stages' reach under a bar and least_slowest's.
  std::vector<double> fastest_;
  std::vector<const std::vector<double>*> tables_;
  StageReach under_;
  SlowestScratch slowest_scratch_;
};

}  // namespace

PlannerOutput pipeline(const Context& ctx) { return PipelinePlanner(ctx, nullptr).run(); }

FrontierOutput frontier(const Context& ctx, double epsilon) {
  FrontierPool pool(ctx, epsilon);
  // The frontier's fast end is the time-optimal plan itself, not one within epsilon of it. That
  // search is independent of the frontier's: without a time limit and with threads to spare it
  // runs beside it, with an Estimator of its own (the estimator caches and is not thread-safe;
  // its caches only remember, so its estimates are the same) and the Evaluator shared. Both end
  // before the pool's candidates are simulated, so the frontier does not depend on which ends
  // first.
  PlannerOutput fastest;
  if (ctx.options.threads > 1 && ctx.options.time_limit_s <= 0) {
    std::exception_ptr failure;
    std::thread beside([&] {
      try {
        const Estimator own(ctx.model, ctx.cluster, ctx.options);
        const Context own_ctx{ctx.model,     ctx.cluster, ctx.options,
                              ctx.evaluator, own,         ctx.deadline};
        fastest = PipelinePlanner(own_ctx, nullptr).run();
      } catch (...) {
        failure = std::current_exception();
      }
    });
    try {
      PipelinePlanner(ctx, &pool).run();
    } catch (...) {
      beside.join();
      throw;
    }
    beside.join();
    if (failure) std::rethrow_exception(failure);
  } else {
    PipelinePlanner(ctx, &pool).run();
    fastest = PipelinePlanner(ctx, nullptr).run();
  }
  const std::string none = fastest.best.error;
  if (fastest.best.ok) pool.include(std::move(fastest.best));
  FrontierOutput out = pool.finish();
  if (out.points.empty()) out.none = none;
  return out;
}

}  // namespace hetplan::search
