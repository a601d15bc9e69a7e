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
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <tuple>

#include "hetplan/search/device_groups.h"
#include "hetplan/search/planners.h"
#include "search_space.h"

namespace hetplan::search {
namespace {

constexpr double kInfTime = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr std::size_t kFrontierCells = 12;  // per DP state, the most (time, memory) points kept

struct StageResources {
  int group = 0;
  int tp = 1;
  std::vector<plan::Replica> replicas;  // even batch shares
};

struct GroupCut {
  int stages = 1;
  int tp = 1;
};

// Ways to cut one group into equal stages with a tensor-parallel degree.
std::vector<GroupCut> group_cuts(const DeviceGroup& g, int max_stages) {
  std::vector<GroupCut> out;
  const int n = g.size(), dpn = g.devices_per_node;
  for (int s = 1; s <= std::min(n, max_stages); ++s) {
    if (n % s) continue;
    const int chunk = n / s;
    if (!(chunk <= dpn ? dpn % chunk == 0 : chunk % dpn == 0)) continue;
    for (int tp : powers_of_two(std::min({8, dpn, chunk}))) {
      if (dpn % tp || chunk % tp) continue;
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
        no_comm_(L_, 0.0),
        pool_(ctx, "pipeline"),
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
    PlannerOutput out = pool_.finish();
    if (!frontier_ && out.estimated == 0 && !ctx_.deadline.expired())
      out.best.error =
          divisible_
              ? "no pipeline shape's layers fit in its devices' memory (with every recomputation "
                "setting and ZeRO stages 0 to 3)"
              : fmt::format(
                    "the global batch {} splits in no pipeline shape: it must be a multiple of "
                    "u*d (u the micro-batch size, 1, 2, 4 or 8; d the most replicas of a stage) "
                    "giving at least as many micro-batches as stages",
                    ctx_.options.global_batch);
    return out;
  }

 private:
  void shapes() {
    const int max_stages = std::min({L_, block_count(ctx_.model) + 2, 32});
    for (const auto& order : group_orders(ctx_.cluster, groups_, ctx_.model.dtype)) {
      std::vector<std::vector<GroupCut>> cuts;
      for (int g : order) cuts.push_back(group_cuts(groups_[g], max_stages));
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
  }

  // False once the deadline has passed.
  bool try_shape(const std::vector<int>& order, const std::vector<GroupCut>& cuts) {
    std::vector<StageResources> stages;
    for (std::size_t i = 0; i < order.size(); ++i) {
      const auto devices = groups_[order[i]].devices();
      const std::size_t chunk = devices.size() / cuts[i].stages;
      for (int s = 0; s < cuts[i].stages; ++s) {
        std::vector<int> part(devices.begin() + s * chunk, devices.begin() + (s + 1) * chunk);
        StageResources st{order[i], cuts[i].tp, tp_replicas(ctx_.cluster, part, cuts[i].tp)};
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
    for (int u : {1, 2, 4, 8}) {
      if (B % (static_cast<std::int64_t>(u) * static_cast<std::int64_t>(dp_max))) continue;
      const int m = static_cast<int>(B / (u * static_cast<std::int64_t>(dp_max)));
      if (S > 1 && m < S) continue;
      divisible_ = true;
      // More recomputation only adds time at a given micro-batch size, so the first mode that
      // fits is the last one worth trying. ZeRO-1 changes time both ways (it shards the
      // optimizer step but splits the all-reduce in two), so both stages are tried.
      for (auto rc : recompute_modes(ctx_.model)) {
        bool placed = false;
        for (int zero : zeros_) {
          if (ctx_.deadline.expired()) return false;
          if (zero >= 1 && dp_max == 1) continue;
          placed = place_layers(stages, m, Settings{rc, zero}) || placed;
        }
        if (placed && !frontier_) break;  // the frontier wants the costlier, smaller ones too
      }
    }
    return true;
  }

  // The layer DP for one shape and setting; offers the plan and returns whether it fitted.
  bool place_layers(const std::vector<StageResources>& stages, int m, Settings set) {
    const int S = static_cast<int>(stages.size());
    plan::Plan settings = base_plan(ctx_, "pipeline");
    settings.recompute = set.recompute;
    settings.zero_stage = set.zero;
    settings.num_microbatches = m;
    const double B = static_cast<double>(ctx_.options.global_batch);
    // Per stage: prefix sums of per-layer time, boundary cost after each layer, memory reach.
    // Stages cut from one group alike share these tables, so they are cached across shapes.
    std::vector<const std::vector<double>*> prefix(S), comm(S);
    std::vector<const std::vector<int>*> reach(S);
    std::vector<MemoryMatrix*> memory(S);
    for (int s = 0; s < S; ++s) {
      const auto& st = stages[s];
      const int dp = static_cast<int>(st.replicas.size());
      const double samples = B / m / dp;
      prefix[s] = &prefix_table(settings, st, samples);
      comm[s] = s + 1 < S ? &comm_table(st, stages[s + 1], samples) : &no_comm_;
    }
    // A lower bound: every layer runs at least as fast as on its fastest stage, the stages share
    // the work at best evenly, so max_s T_s >= W / S and sum_s T_s >= W. Shapes that cannot beat
    // the candidates kept so far are skipped (more recomputation only raises the bound, so the
    // caller may stop here too).
    if (!frontier_) {
      double W = 0;
      for (int l = 0; l < L_; ++l) {
        double fastest = kInfTime;
        for (int s = 0; s < S; ++s)
          fastest = std::min(fastest, (*prefix[s])[l + 1] - (*prefix[s])[l]);
        W += fastest;
      }
      if ((m - 1) * W / S + W > pool_.threshold_s()) return true;
    }
    for (int s = 0; s < S; ++s) {
      const int dp = static_cast<int>(stages[s].replicas.size());
      memory[s] = &memory_matrix(settings, stages[s], B / m / dp, std::min(m, S - s));
      reach[s] = &memory[s]->reach;
    }
    auto stage_mem = [&](int s, int a, int b) { return memory[s]->at(a, b); };
    // DP over (stage s, layers placed i): per state the placements' (max, sum) of stage times and
    // peak memory, keeping one (the best score) or, for the frontier, an epsilon-Pareto set of
    // (score, memory).
    struct Cell {
      double mx, sum, mem;
      int from_a, from_k;  // predecessor state (s - 1, from_a), its from_k-th cell
    };
    auto score = [&](const Cell& c) { return (m - 1) * c.mx + c.sum; };
    const bool pareto = frontier_ != nullptr;
    const double eps = pareto ? frontier_->epsilon : 0;
    auto insert = [&](std::vector<Cell>& cells, const Cell& c) {
      if (!pareto) {
        if (cells.empty() || score(c) < score(cells[0])) cells.assign(1, c);
        return;
      }
      for (const auto& o : cells)
        if (score(o) <= score(c) * (1 + eps) && o.mem <= c.mem * (1 + eps)) return;
      std::erase_if(cells, [&](const Cell& o) { return score(c) <= score(o) && c.mem <= o.mem; });
      cells.push_back(c);
      if (cells.size() > kFrontierCells) {
        std::sort(cells.begin(), cells.end(),
                  [&](const Cell& x, const Cell& y) { return score(x) < score(y); });
        cells.resize(kFrontierCells);
      }
    };
    std::vector<std::vector<std::vector<Cell>>> best(S, std::vector<std::vector<Cell>>(L_ + 1));
    // A stage's passes and its boundary's transfers overlap: the pipeline's pace is the slower of
    // a stage's compute and a boundary's transfer one way (each direction has its own), and the
    // first micro-batch's way down and the last one's way back pay both.
    for (int i = 1; i <= L_ && i <= (*reach[0])[0]; ++i) {
      const double t = (*prefix[0])[i], c = (*comm[0])[i - 1];
      insert(best[0][i], Cell{std::max(t, c / 2), t + c, pareto ? stage_mem(0, 0, i) : 0, 0, 0});
    }
    for (int s = 1; s < S; ++s)
      for (int a = s; a < L_; ++a) {
        const auto& prev = best[s - 1][a];
        if (prev.empty()) continue;
        const int last_i = s + 1 == S ? L_ : L_ - (S - 1 - s);
        for (int i = a + 1; i <= std::min((*reach[s])[a], last_i); ++i) {
          const double t = (*prefix[s])[i] - (*prefix[s])[a], c = (*comm[s])[i - 1];
          const double mem = pareto ? stage_mem(s, a, i) : 0;
          for (std::size_t k = 0; k < prev.size(); ++k) {
            const Cell& pc = prev[k];
            insert(best[s][i], Cell{std::max({pc.mx, t, c / 2}), pc.sum + t + c,
                                    std::max(pc.mem, mem), a, static_cast<int>(k)});
          }
        }
      }
    const auto& ends = best[S - 1][L_];
    if (ends.empty()) return false;
    for (std::size_t k0 = 0; k0 < ends.size(); ++k0) {
      if (!pareto && score(ends[k0]) > pool_.threshold_s()) continue;  // fits, but cannot win
      std::vector<int> cut(S + 1, 0);
      cut[S] = L_;
      int i = L_, k = static_cast<int>(k0);
      for (int s = S - 1; s >= 1; --s) {
        const Cell& c = best[s][i][k];
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
        pool_.offer(std::move(p));
    }
    return true;
  }

  // Peak memory of a device of one kind of stage holding layers [a, b), computed as asked, and
  // reach[a]: the largest b with [a, b) fitting the device (a when not even one layer fits).
  struct MemoryMatrix {
    std::function<double(int, int)> compute;
    int layers = 0;
    std::vector<int> reach;
    std::vector<double> cells;  // (a, b) at a * (layers + 1) + b; NaN until asked
    double at(int a, int b) {
      if (cells.empty()) cells.assign(static_cast<std::size_t>(layers) * (layers + 1), kNaN);
      double& v = cells[static_cast<std::size_t>(a) * (layers + 1) + b];
      if (std::isnan(v)) v = compute(a, b);
      return v;
    }
  };
  // (group, tp, dp, samples per micro-batch, recompute, ZeRO stage).
  using SettingsKey = std::tuple<int, int, int, double, int, int>;

  SettingsKey settings_key(const plan::Plan& settings, const StageResources& st,
                           double samples) const {
    return {st.group,
            st.tp,
            static_cast<int>(st.replicas.size()),
            samples,
            static_cast<int>(settings.recompute),
            settings.zero_stage};
  }

  const std::vector<double>& prefix_table(const plan::Plan& settings, const StageResources& st,
                                          double samples) {
    auto [it, fresh] = prefix_.try_emplace(settings_key(settings, st, samples));
    if (fresh) {
      const int dp = static_cast<int>(st.replicas.size());
      const auto& t = ctx_.estimator.layer_costs(settings, st.replicas.front(), samples, dp);
      it->second.assign(L_ + 1, 0);
      for (int l = 0; l < L_; ++l) it->second[l + 1] = it->second[l] + t.forward[l] + t.backward[l];
    }
    return it->second;
  }

  // Both directions' transfer of one micro-batch after each layer, from stage st to stage next.
  const std::vector<double>& comm_table(const StageResources& st, const StageResources& next,
                                        double samples) {
    const auto& from = st.replicas.front();
    const auto& to = next.replicas.front();
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

  MemoryMatrix& memory_matrix(const plan::Plan& settings, const StageResources& st, double samples,
                              int inflight) {
    auto [it, fresh] =
        memory_.try_emplace(std::make_tuple(settings_key(settings, st, samples), inflight));
    MemoryMatrix& mm = it->second;
    if (!fresh) return mm;
    const int dp = static_cast<int>(st.replicas.size());
    const plan::Replica& r = st.replicas.front();
    mm.layers = L_;
    mm.compute = [this, settings, r, dp, samples, inflight](int a, int b) {
      return ctx_.estimator.device_memory(settings, a, b - a, r, 0, dp, samples, inflight);
    };
    const double cap = ctx_.cluster.type_of(r.devices.front()).memory.value;
    mm.reach.assign(L_, 0);
    for (int a = 0; a < L_; ++a) {
      // [a, reach[a - 1]) is inside [a - 1, reach[a - 1]), so it fits too.
      int lo = a > 0 ? std::max(a, mm.reach[a - 1]) : a, hi = L_;
      while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (mm.compute(a, mid) <= cap)
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
  std::vector<double> no_comm_;  // the last stage sends nothing on
  std::map<SettingsKey, std::vector<double>> prefix_;
  std::map<std::tuple<int, int, std::size_t, double>, std::vector<double>> comm_;
  std::map<std::tuple<SettingsKey, int>, MemoryMatrix> memory_;
  CandidatePool pool_;
  bool divisible_ = false;  // whether some shape split the global batch into micro-batches
  FrontierPool* frontier_ = nullptr;  // set: track the time/memory frontier instead of one best
  std::vector<int> zeros_{0, 1};      // the ZeRO stages this pass tries
};

}  // namespace

PlannerOutput pipeline(const Context& ctx) { return PipelinePlanner(ctx, nullptr).run(); }

FrontierOutput frontier(const Context& ctx, double epsilon) {
  FrontierPool pool(ctx, epsilon);
  PipelinePlanner(ctx, &pool).run();
  // The frontier's fast end is the time-optimal plan itself, not one within epsilon of it.
  if (PlannerOutput fastest = PipelinePlanner(ctx, nullptr).run(); fastest.best.ok)
    pool.include(std::move(fastest.best));
  return pool.finish();
}

}  // namespace hetplan::search
