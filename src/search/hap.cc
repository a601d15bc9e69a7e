// HAP-style SPMD synthesis: the planner around the program search (hap.h, hap_search.cc).
//
// For a replica (a set of unlike devices running one SPMD program) with sharding ratios r_j, the
// cost of a program is per micro-batch, times the micro-batches: per op the slowest device's
// forward and backward time (recomputed forward included) at its share (r_j when split, 1 when
// replicated), the collectives between layouts on every data edge (the cost layer picks padded or
// grouped forms for uneven shards), once per iteration the all-reduce of the weight gradients
// of ops split by batch, and per micro-batch the weight all-gathers and gradient reduce-scatters
// of ops split by batch with their weights sharded (batch_sharded: HAP's parameter sharding). With
// the program fixed, a linear program picks the ratios: minimise the sum over units of the slowest
// device's compute (per device class, linearised at the current ratios) subject to each device's
// memory; program search and LP alternate until the cost stops improving by 0.1%. A device class is
// a device type at a node's cpu_share: devices of one class are interchangeable, so the LP gives
// them one ratio (a ratio per device would take the same values at the optimum).
#include "hetplan/search/hap.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>

#include "hetplan/cost/compute_cost.h"
#include "hetplan/cost/memory_cost.h"
#include "hetplan/model/training.h"
#include "hetplan/plan/validate.h"
#include "hetplan/search/device_groups.h"
#include "hetplan/search/lp.h"
#include "hetplan/sim/layer_costs.h"
#include "hetplan/sim/tensor_layout.h"
#include "search_space.h"

namespace hetplan::search {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();
constexpr int kMaxSpmdDevices = 64;  // larger replicas: one per node instead

// Ops that take one split together: the op of every transformer block with the same name suffix
// (named by a pattern), or one op elsewhere.
struct Unit {
  std::string pattern;
  std::vector<int> ops;
  std::vector<plan::SplitKind> choices;
};

// heads_by_tensor false, the programs tried where the first one's plan was refused: no op of a
// transformer layer that splits heads or experts may go by tensor (for a replica whose shares
// would leave the heads unevenly split or a device without), and only the embedding layer's ops
// may be replicated (what the runtime replicates in a batch program: the word embedding).
std::vector<Unit> make_units(const model::Model& m, int tp, bool heads_by_tensor) {
  std::map<std::string, int> index;
  std::vector<Unit> units;
  for (const auto& layer : m.layers) {
    std::string prefix;
    if (layer.kind == model::LayerKind::transformer) {
      std::size_t cut = layer.name.size();
      while (cut > 0 && std::isdigit(static_cast<unsigned char>(layer.name[cut - 1]))) --cut;
      if (cut < layer.name.size()) prefix = layer.name.substr(0, cut) + "*";
    }
    for (int op = layer.first_op; op < layer.first_op + layer.num_ops; ++op) {
      const std::string& name = m.ops[op].name;
      const std::string pattern = prefix.empty() ? name : prefix + name.substr(layer.name.size());
      auto [it, fresh] = index.try_emplace(pattern, static_cast<int>(units.size()));
      if (fresh) {
        Unit u;
        u.pattern = pattern;
        const model::Op& o = m.ops[op];
        // Heads (and experts) bound how far attention and experts split by tensor dimension.
        const bool tensor_ok = o.shard == model::ShardKind::replicated ||
                               !(layer.kind == model::LayerKind::transformer &&
                                 (!heads_by_tensor || (m.heads > 0 && tp > m.heads) ||
                                  (m.experts > 0 && tp > m.experts)));
        if (tensor_ok) u.choices.push_back(plan::SplitKind::tensor);
        u.choices.push_back(plan::SplitKind::batch);
        if (o.params > 0) u.choices.push_back(plan::SplitKind::batch_sharded);
        if (o.shard != model::ShardKind::replicated &&
            (heads_by_tensor || layer.kind == model::LayerKind::embedding))
          u.choices.push_back(plan::SplitKind::replicate);
        units.push_back(std::move(u));
      }
      units[it->second].ops.push_back(op);
    }
  }
  return units;
}

// Devices that compute alike: one type at one cpu_share.
using DeviceClass = std::pair<int, double>;  // (device type, its node's cpu_share)

DeviceClass class_of(const cluster::Cluster& c, int device) {
  return {c.devices[device].type, c.nodes[c.devices[device].node].cpu_share};
}

// Costs of programs on one replica at given ratios; builds the search instance.
class SpmdCoster {
 public:
  SpmdCoster(const Context& ctx, const std::vector<Unit>& units, const plan::Plan& settings,
             const std::vector<int>& devices)
      : ctx_(ctx),
        units_(units),
        settings_(settings),
        devices_(devices),
        compute_(ctx.options.sim.compute, ctx.options.sim.profile),
        tg_(model::derive_training_graph(ctx.model)) {
    unit_of_.assign(ctx.model.ops.size(), -1);
    for (std::size_t u = 0; u < units.size(); ++u)
      for (int op : units[u].ops) unit_of_[op] = static_cast<int>(u);
    backward_of_.assign(ctx.model.ops.size(), -1);
    for (std::size_t i = 0; i < tg_.backward.size(); ++i)
      backward_of_[tg_.backward[i].op] = static_cast<int>(i);
    for (int d : devices) classes_.push_back(class_of(ctx.cluster, d));
    std::sort(classes_.begin(), classes_.end());
    classes_.erase(std::unique(classes_.begin(), classes_.end()), classes_.end());
    for (int d : devices)
      class_index_.push_back(
          static_cast<int>(std::find(classes_.begin(), classes_.end(), class_of(ctx.cluster, d)) -
                           classes_.begin()));
  }

  int num_classes() const { return static_cast<int>(classes_.size()); }
  // FLOP/s of a device of class t (device_peak of one of them: its type's at its cpu_share).
  double class_peak(int t) const {
    const auto j = std::find(class_index_.begin(), class_index_.end(), t) - class_index_.begin();
    return device_peak(ctx_.cluster, devices_[static_cast<std::size_t>(j)], ctx_.model.dtype);
  }
  int count_of(int cls) const {
    return static_cast<int>(std::count(class_index_.begin(), class_index_.end(), cls));
  }

  // Forward + backward (+ recomputed forward) seconds of op on a device of class `cls` at a
  // share.
  double compute_time(int op, int cls, double samples, double share) const {
    const auto& dev = ctx_.cluster.device_types[classes_[cls].first];
    const double slowdown = 1.0 / classes_[cls].second;
    const model::DType dt = ctx_.model.dtype;
    double f = compute_.op_time(dev, tg_.forward[op], samples, share, dt).value * slowdown;
    double b =
        backward_of_[op] >= 0
            ? compute_.op_time(dev, tg_.backward[backward_of_[op]], samples, share, dt).value *
                  slowdown
            : 0.0;
    return f + b +
           (cost::recomputes(settings_.recompute, ctx_.model, ctx_.model.ops[op]) ? f : 0.0);
  }

  bool whole_work(int op, plan::SplitKind k) const {
    return sim::computes_whole(ctx_.model.ops[op], k, settings_.sequence_parallel);
  }

  double collective(cost::Collective kind, double bytes, const std::vector<double>& shares) const {
    if (devices_.size() < 2 || bytes <= 0) return 0;
    auto key = std::make_tuple(static_cast<int>(kind), bytes, shares);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    cost::CollectiveRequest req;
    req.kind = kind;
    req.devices = devices_;
    req.bytes = Bytes(bytes);
    req.shares = shares;
    const double t = cost::collective_cost(ctx_.cluster, req, ctx_.options.sim.network).time.value;
    cache_.emplace(std::move(key), t);
    return t;
  }

  // Seconds per byte of gradient all-reduced once per iteration. The gradients of ops split by
  // batch are all-reduced together: by the simulator in one collective per replica once its
  // backward pass ends, by the runtime in buckets of the plan's grad_bucket_bytes. So an op pays
  // its bytes' part of a shared all-reduce, latency included, not an all-reduce of its own (with
  // its own latency: between CPU workers that made splitting by batch look dearer than replicating
  // every op). The shared all-reduce is taken as a full bucket, or as all the model's gradients
  // when they fill less; only its latency's share differs from what the simulator runs.
  double gradient_sync_per_byte() const {
    const double bucket =
        std::min(settings_.grad_bucket_bytes, static_cast<double>(ctx_.model.parameters()) *
                                                  model::dtype_bytes(ctx_.model.dtype));
    if (bucket <= 0) return 0;
    return collective(cost::Collective::all_reduce, bucket, {}) / bucket;
  }

  // The search instance at ratios `shares` (per device), `samples` per micro-batch, m rounds,
  // without memory limits (add_memory).
  SpmdInstance instance(const std::vector<double>& shares, double samples, int m) const {
    SpmdInstance inst;
    const model::Model& md = ctx_.model;
    std::map<int, double> share_of_class;
    for (std::size_t j = 0; j < devices_.size(); ++j)
      share_of_class[class_index_[j]] = std::max(share_of_class[class_index_[j]], shares[j]);
    std::map<std::pair<int, int>, std::size_t> edge_index;
    for (std::size_t u = 0; u < units_.size(); ++u) {
      const Unit& unit = units_[u];
      // Blocks alike: one op stands for the unit's others when they cost the same.
      const bool alike = std::all_of(unit.ops.begin(), unit.ops.end(), [&](int op) {
        const model::Op &a = md.ops[op], &b = md.ops[unit.ops.front()];
        return a.flops == b.flops && a.bytes_read == b.bytes_read &&
               a.bytes_written == b.bytes_written && a.params == b.params && a.kind == b.kind;
      });
      const double copies = alike ? static_cast<double>(unit.ops.size()) : 1.0;
      std::vector<double> cost;
      for (plan::SplitKind k : unit.choices) {
        double t = 0;
        for (int op : unit.ops) {
          if (alike && op != unit.ops.front()) break;
          double slowest = 0;
          for (auto [cls, share] : share_of_class)
            if (share > 0)  // a class without a share is dropped from the replica
              slowest = std::max(slowest,
                                 compute_time(op, cls, samples, whole_work(op, k) ? 1.0 : share));
          const model::Op& o = md.ops[op];
          if (k == plan::SplitKind::tensor && o.shard == model::ShardKind::expert)
            slowest += 4 * collective(cost::Collective::all_to_all, o.bytes_read * samples, shares);
          if (k == plan::SplitKind::tensor && o.shard == model::ShardKind::vocab &&
              o.kind == model::OpKind::cross_entropy)
            slowest += collective(cost::Collective::all_reduce, 2 * o.bytes_written * samples, {});
          t += copies * m * slowest;
          if (k == plan::SplitKind::batch && o.params > 0)
            t += copies * static_cast<double>(o.params) * model::dtype_bytes(ctx_.model.dtype) *
                 gradient_sync_per_byte();
          if (k == plan::SplitKind::batch_sharded && o.params > 0) {
            // Per micro-batch: the weights gathered for the forward and the backward pass, the
            // gradients reduce-scattered (as the simulator runs them).
            const double bytes =
                static_cast<double>(o.params) * model::dtype_bytes(ctx_.model.dtype);
            t += copies * m *
                 (2 * collective(cost::Collective::all_gather, bytes, shares) +
                  collective(cost::Collective::reduce_scatter, bytes, shares));
          }
        }
        cost.push_back(t);
      }
      inst.unit_cost.push_back(std::move(cost));
    }
    // Adds pair_cost(choice of unit a, choice of unit b) to the edge between a and b (to unit a's
    // own costs when a == b: both ends take its one choice).
    auto add_pair = [&](int a, int b, const auto& pair_cost) {
      if (a == b) {
        for (std::size_t c = 0; c < units_[a].choices.size(); ++c)
          inst.unit_cost[a][c] += pair_cost(units_[a].choices[c], units_[a].choices[c]);
        return;
      }
      const int lo = std::min(a, b), hi = std::max(a, b);
      auto [it, fresh] = edge_index.try_emplace({lo, hi}, inst.edges.size());
      if (fresh) {
        SpmdEdge e;
        e.a = lo;
        e.b = hi;
        e.cost.assign(units_[lo].choices.size(),
                      std::vector<double>(units_[hi].choices.size(), 0.0));
        inst.edges.push_back(std::move(e));
      }
      SpmdEdge& e = inst.edges[it->second];
      for (std::size_t ca = 0; ca < units_[a].choices.size(); ++ca)
        for (std::size_t cb = 0; cb < units_[b].choices.size(); ++cb) {
          const double t = pair_cost(units_[a].choices[ca], units_[b].choices[cb]);
          if (a == lo)
            e.cost[ca][cb] += t;
          else
            e.cost[cb][ca] += t;
        }
    };
    // Data edges between units: the forward conversion and the backward one, per micro-batch.
    for (std::size_t op = 0; op < md.ops.size(); ++op) {
      const int b = unit_of_[op];
      for (int in : md.ops[op].inputs) {
        const int a = unit_of_[in];
        const double bytes = md.output_bytes(in) * samples;
        auto pair_cost = [&](plan::SplitKind kp, plan::SplitKind kc) {
          const auto from = sim::op_layout(md.ops[in], kp, false).output;
          const auto to = sim::op_layout(md.ops[op], kc, false);
          double t = 0;
          if (auto c = sim::conversion(from, to.input)) t += collective(*c, bytes, shares);
          if (auto c = sim::conversion(to.input_grad, sim::gradient_layout(from)))
            t += collective(*c, bytes, shares);
          return m * t;
        };
        add_pair(a, b, pair_cost);
      }
    }
    // A tied LM head split by batch reads the word embedding's table whole: split by vocabulary
    // (tensor), the table is gathered for each pass and its gradient reduce-scattered, as the
    // simulator prices it (sim/stage_costs.cc).
    if (const int head = md.tied_reader(); head >= 0) {
      const double bytes =
          static_cast<double>(md.ops[head].tied_params) * model::dtype_bytes(md.dtype);
      const double gather = m * (2 * collective(cost::Collective::all_gather, bytes, shares) +
                                 collective(cost::Collective::reduce_scatter, bytes, shares));
      add_pair(unit_of_[md.tied_owner()], unit_of_[head],
               [&](plan::SplitKind table, plan::SplitKind k) {
                 const bool by_batch =
                     k == plan::SplitKind::batch || k == plan::SplitKind::batch_sharded;
                 return table == plan::SplitKind::tensor && by_batch ? gather : 0.0;
               });
    }
    return inst;
  }

  // Peak bytes of device j under plan p at the given ratios.
  double device_bytes(const plan::Plan& p, std::size_t j, const std::vector<double>& shares,
                      double samples, int dp) const {
    plan::Replica r;
    r.devices = devices_;
    r.tp_shares = shares;
    const int L = static_cast<int>(ctx_.model.layers.size());
    return cost::stage_memory(ctx_.model, sim::memory_config(ctx_.model, p, 0, L, r,
                                                             static_cast<int>(j), dp, samples, 1))
        .total()
        .value;
  }

  // Memory per device class as search resources: every op split by tensor dimension is the
  // baseline; a unit's other choices add (or save) what they change on a device of that class.
  void add_memory(SpmdInstance& inst, const std::vector<double>& shares, double samples,
                  int dp) const {
    std::vector<std::size_t> sample_device;  // one device per class
    for (int k = 0; k < num_classes(); ++k)
      sample_device.push_back(static_cast<std::size_t>(
          std::find(class_index_.begin(), class_index_.end(), k) - class_index_.begin()));
    plan::Plan base = settings_;
    base.op_overrides.clear();
    std::vector<double> base_bytes;
    for (std::size_t i = 0; i < classes_.size(); ++i) {
      base_bytes.push_back(device_bytes(base, sample_device[i], shares, samples, dp));
      inst.capacity.push_back(ctx_.cluster.device_types[classes_[i].first].memory.value -
                              base_bytes.back());
    }
    for (const Unit& u : units_) {
      std::vector<std::vector<double>> per_choice;
      for (plan::SplitKind k : u.choices) {
        std::vector<double> use(classes_.size(), 0.0);
        if (k != plan::SplitKind::tensor) {
          plan::Plan one = base;
          one.op_overrides = {{u.pattern, k}};
          for (std::size_t i = 0; i < classes_.size(); ++i)
            use[i] = device_bytes(one, sample_device[i], shares, samples, dp) - base_bytes[i];
        }
        per_choice.push_back(std::move(use));
      }
      inst.unit_use.push_back(std::move(per_choice));
    }
  }

  // The plan settings of a program: op overrides for every unit not split by tensor dimension.
  plan::Plan with_program(const std::vector<int>& choice) const {
    plan::Plan p = settings_;
    p.op_overrides.clear();
    for (std::size_t u = 0; u < units_.size(); ++u) {
      const plan::SplitKind k = units_[u].choices[static_cast<std::size_t>(choice[u])];
      if (k != plan::SplitKind::tensor) p.op_overrides.push_back({units_[u].pattern, k});
    }
    return p;
  }

  // Per device class: the ratio LP at the program `choice`, linearising each op's time at the
  // current ratios. Error when no ratios fit the devices' memory.
  Result<std::vector<double>> ratios(const std::vector<int>& choice,
                                     const std::vector<double>& shares, double samples, int m,
                                     int dp) const {
    const plan::Plan p = with_program(choice);
    LpRequest req;
    std::vector<int> var(classes_.size());  // class -> LP variable (share per device of it)
    LpRow sum{"shares sum to 1", {}, 1.0, 1.0};
    std::vector<double> current(classes_.size());
    for (std::size_t j = 0; j < devices_.size(); ++j) current[class_index_[j]] = shares[j];
    for (int t = 0; t < num_classes(); ++t) {
      var[t] = req.add_variable({fmt::format("r_class{}", t), 0.0, 1.0, 0.0, false});
      sum.terms.push_back({var[t], static_cast<double>(count_of(t))});
    }
    req.add_row(std::move(sum));
    bool splits = false;
    for (std::size_t u = 0; u < units_.size(); ++u) {
      const plan::SplitKind k = units_[u].choices[static_cast<std::size_t>(choice[u])];
      if (whole_work(units_[u].ops.front(), k)) continue;
      splits = true;
      const int z = req.add_variable({fmt::format("z{}", u), 0.0, kInf, 1.0, false});
      for (int t = 0; t < num_classes(); ++t) {
        const double r0 = std::max(current[t], 1e-3);
        double per_share = 0;
        for (int op : units_[u].ops) per_share += m * compute_time(op, t, samples, r0) / r0;
        req.add_row({fmt::format("unit {} on class {}", u, t),
                     {{var[t], per_share}, {z, -1.0}},
                     -kInf,
                     0.0});
      }
    }
    // Memory: linear in the device's share (parameters and activations of split ops).
    // (The memory model does not depend on the device, only on its share.)
    auto bytes_at = [&](double share) {
      return device_bytes(p, 0, std::vector<double>(devices_.size(), share), samples, dp);
    };
    const double fixed = bytes_at(0.0), per_share = bytes_at(1.0) - fixed;
    for (int t = 0; t < num_classes(); ++t) {
      const double cap = ctx_.cluster.device_types[classes_[t].first].memory.value;
      req.add_row(
          {fmt::format("memory of class {}", t), {{var[t], per_share}}, -kInf, cap - fixed});
    }
    auto sol = solve_checked(req);
    if (!sol) return sol.error();
    std::vector<double> out(devices_.size());
    for (std::size_t j = 0; j < devices_.size(); ++j) out[j] = sol->values[var[class_index_[j]]];
    if (!splits) {
      // Every op whole on every device: the ratios move no work, and the program runs at its
      // slowest device's pace, so the fastest class takes it all and the replica drops the
      // others (the LP's answer is any vertex: it had kept the slowest).
      int fastest = 0;
      for (int t = 1; t < num_classes(); ++t)
        if (class_peak(t) > class_peak(fastest)) fastest = t;
      for (std::size_t j = 0; j < devices_.size(); ++j)
        out[j] = class_index_[j] == fastest ? 1.0 / count_of(fastest) : 0.0;
    }
    return out;
  }

 private:
  const Context& ctx_;
  const std::vector<Unit>& units_;
  plan::Plan settings_;
  std::vector<int> devices_;
  cost::ComputeCostModel compute_;
  model::TrainingGraph tg_;
  std::vector<int> unit_of_, backward_of_;
  std::vector<DeviceClass> classes_;  // ascending
  std::vector<int> class_index_;      // per device of the replica: its class
  mutable std::map<std::tuple<int, double, std::vector<double>>, double> cache_;
};

struct Synthesis {
  plan::Plan settings;         // with the program's op overrides
  std::vector<double> shares;  // per device
  double cost = 0;             // per iteration, seconds (the program's own model)
};

// Program search and ratio LP, alternated, for one replica; nullopt when nothing fits.
std::optional<Synthesis> synthesize(const Context& ctx, const plan::Plan& settings,
                                    const std::vector<int>& devices, double samples, int m, int dp,
                                    bool heads_by_tensor) {
  const auto units = make_units(ctx.model, static_cast<int>(devices.size()), heads_by_tensor);
  SpmdCoster coster(ctx, units, settings, devices);
  // Start from ratios proportional to peak FLOP/s.
  std::vector<double> shares;
  double total = 0;
  for (int d : devices) total += device_peak(ctx.cluster, d, ctx.model.dtype);
  for (int d : devices) shares.push_back(device_peak(ctx.cluster, d, ctx.model.dtype) / total);
  std::optional<Synthesis> best;
  for (int round = 0; round < 4 && !(best && ctx.deadline.expired()); ++round) {
    SpmdInstance inst = coster.instance(shares, samples, m);
    coster.add_memory(inst, shares, samples, dp);
    SpmdSearchLimits limits;
    limits.stop = [&] { return ctx.deadline.expired(); };
    const SpmdProgram prog = synthesize_program(inst, limits);
    if (!prog.feasible) return best;
    auto next = coster.ratios(prog.choice, shares, samples, m, dp);
    if (!next) return best;  // no ratios fit this program's memory
    const double cost = program_cost(coster.instance(*next, samples, m), prog.choice);
    if (best && cost >= best->cost * (1 - 1e-3)) break;
    best = Synthesis{coster.with_program(prog.choice), *next, cost};
    shares = *next;
  }
  return best;
}

// Drops devices with a zero ratio; rounds ratios to 1e-6 and renormalises.
plan::Replica make_replica(const std::vector<int>& devices, const std::vector<double>& shares) {
  plan::Replica r;
  double sum = 0;
  for (std::size_t j = 0; j < devices.size(); ++j)
    if (shares[j] > 1e-6) {
      r.devices.push_back(devices[j]);
      r.tp_shares.push_back(std::round(shares[j] * 1e6) / 1e6);
      sum += r.tp_shares.back();
    }
  for (double& s : r.tp_shares) s /= sum;
  bool even = true;
  for (double s : r.tp_shares) even = even && std::abs(s - r.tp_shares.front()) < 1e-9;
  if (even) r.tp_shares.clear();
  return r;
}

}  // namespace

PlannerOutput hap(const Context& ctx) {
  const auto groups = device_groups(ctx.cluster);
  const std::int64_t B = ctx.options.global_batch;
  const int L = static_cast<int>(ctx.model.layers.size());
  std::vector<plan::Plan> candidates;
  // Replica layouts: the whole cluster as one SPMD program (when small enough), and one program
  // per node with data parallelism across nodes.
  std::vector<std::vector<std::vector<int>>> layouts;
  std::vector<int> all(static_cast<std::size_t>(ctx.cluster.num_devices()));
  for (int d = 0; d < ctx.cluster.num_devices(); ++d) all[static_cast<std::size_t>(d)] = d;
  if (ctx.cluster.num_devices() <= kMaxSpmdDevices) layouts.push_back({all});
  std::vector<std::vector<int>> nodes;
  for (const auto& g : groups)
    for (const auto& n : g.nodes) nodes.push_back(n);
  if (nodes.size() > 1 || layouts.empty()) layouts.push_back(nodes);

  for (const auto& replicas : layouts) {
    const int R = static_cast<int>(replicas.size());
    // With several replicas, ZeRO shards what every replica holds (its optimizer states, gradients
    // and weights) over the replicas too.
    const std::vector<int> zero_stages = R > 1 ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{0};
    for (int zero : zero_stages)
      for (auto rc : recompute_modes(ctx.model)) {
        bool fitted = false;
        for (std::int64_t m = 1; m <= B && !fitted; m *= 2) {
          if (ctx.deadline.expired()) break;
          if (B / m < R) break;
          plan::Plan settings = base_plan(ctx, "hap");
          settings.recompute = rc;
          settings.num_microbatches = static_cast<int>(m);
          settings.zero_stage = zero;
          const double samples = static_cast<double>(B) / static_cast<double>(m * R);
          // Programs that split heads or experts by tensor first; where one of those plans is not
          // valid or not executed (the ratios split the heads unevenly, or leave a device without
          // a key/value head, or an op is replicated that the runtime does not replicate), the
          // programs again without (make_units).
          for (bool heads_by_tensor : {true, false}) {
            // One program per kind of replica (same device classes in the same order).
            std::map<std::vector<DeviceClass>, std::optional<Synthesis>> by_kind;
            std::vector<Synthesis> found;
            bool ok = true;
            for (const auto& devs : replicas) {
              std::vector<DeviceClass> kind;
              for (int d : devs) kind.push_back(class_of(ctx.cluster, d));
              auto it = by_kind.find(kind);
              if (it == by_kind.end())
                it = by_kind
                         .emplace(kind, synthesize(ctx, settings, devs, samples,
                                                   static_cast<int>(m), R, heads_by_tensor))
                         .first;
              if (!it->second) {
                ok = false;
                break;
              }
              found.push_back(*it->second);
            }
            if (!ok) break;
            // Across replicas: batch shares inversely proportional to each one's cost per
            // sample. Replicas of different kinds may have chosen different programs; one plan
            // carries one set of op overrides, so each kind's program is tried for every replica.
            bool refused = false;
            for (const auto& [kind, syn] : by_kind) {
              plan::Plan p = syn->settings;
              p.recompute = rc;
              p.num_microbatches = static_cast<int>(m);
              plan::Stage st;
              st.num_layers = L;
              std::vector<double> speed;
              for (std::size_t r = 0; r < replicas.size(); ++r) {
                st.replicas.push_back(make_replica(replicas[r], found[r].shares));
                speed.push_back(1.0 / std::max(found[r].cost, 1e-12));
              }
              set_batch_shares(st.replicas, proportional_split(speed, B / m));
              p.stages = {std::move(st)};
              const bool bad = heads_by_tensor &&
                               (!plan::validate_plan(p, ctx.model, ctx.cluster, "plan") ||
                                (ctx.options.executable && !ctx.options.executable(p).empty()));
              refused = refused || bad;
              if (!bad) candidates.push_back(std::move(p));
            }
            fitted = true;
            if (!refused) break;
          }
        }
      }
  }
  if (candidates.empty()) {
    PlannerOutput out;
    out.name = "hap";
    out.best.error =
        ctx.deadline.expired()
            ? "the time limit passed before an SPMD program was synthesised"
            : fmt::format(
                  "no SPMD program fits in the devices' memory (one program per replica, over the "
                  "whole cluster and per node, with each recomputation setting, each ZeRO stage "
                  "over the programs per node, and 1 to {} micro-batches)",
                  B);
    return out;
  }
  return select_candidates(ctx, "hap", std::move(candidates));
}

}  // namespace hetplan::search
