#include "op_level_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <tuple>

#include "autocast_scope.h"
#include "batches.h"
#include "check/stage_plan.h"
#include "checkpoint.h"
#include "grad_buckets.h"
#include "hetplan/plan/op_groups.h"
#include "hetplan/sim/gradient_buckets.h"
#include "loss_scaler.h"
#include "memory_probe.h"
#include "op_graph.h"
#include "peer_watch.h"
#include "process_groups.h"
#include "run_result.h"
#include "run_support.h"
#include "shard_layouts.h"
#include "split_group.h"
#include "sufficient_factors.h"
#include "tensor_parallel.h"
#include "zero_slice.h"

namespace hetplan::runtime::detail {
namespace {

using PG = c10::intrusive_ptr<Collectives>;

using Layout = OpLevelLayout;

// A group's devices as a process group: its members in ascending rank order.
struct Subgroup {
  std::vector<int> ranks;  // ascending
  PG pg;                   // null on the ranks outside it
  int rank_in(int world_rank) const { return Layout::index_in(ranks, world_rank); }
};

// Whole groups whose gradients are summed alike: over one subgroup, all-reduced or served (by
// these ranks of it).
struct FusedKey {
  int subgroup = -1;
  bool served = false;
  std::vector<int> servers;
  auto operator<=>(const FusedKey&) const = default;
};

void add_rows(torch::Tensor& acc, const std::vector<std::int64_t>& shape, std::int64_t begin,
              const torch::Tensor& g) {
  if (!acc.defined()) acc = torch::zeros(shape, g.options());
  acc.slice(0, begin, begin + g.size(0)).add_(g);
}

}  // namespace

Result<RunResult> run_op_level(const model::Model& m, const plan::Plan& p, const RunOptions& opts,
                               const RankEnv& env, const c10::Device& dev) {
  if (auto ok = check_op_level(m, p, env.world_size); !ok) return ok.error();
  const Layout at(m, p);
  const int me = env.rank;
  // Mixed precision: each op's forward pass under autocast (the stage runtime's: bf16, or fp16 on
  // CUDA); what travels between ranks (activations, their gradients, sufficient factors) goes in
  // fp32, as Gloo has no 16-bit types, and parameters, gradients and Adam's state stay fp32.
  const AutocastState autocast = AutocastState::of(opts.precision, dev.is_cuda());
  const bool mixed_precision = autocast.cpu || autocast.cuda;
  const auto on_dev = torch::TensorOptions().device(dev);
  auto sync = [&] {
    if (dev.is_cuda()) torch::cuda::synchronize();
  };
  torch::set_num_threads(std::max(1, opts.threads_per_rank));
  torch::manual_seed(opts.seed);
  // Every rank builds the graph whole in host memory (the same initial weights), cuts its ops'
  // weights there and moves only those to the device (below).
  auto graph = std::make_shared<OpGraph>(m);
  auto data = BatchSource::create(m, opts.seed, opts.data_file);
  if (!data) return data.error();
  const auto timeout = std::chrono::milliseconds(std::llround(opts.timeout_s * 1000));

  // One process group per distinct set of devices (of more than one) that a group, a replica of
  // a split group, or the members at one place of a split group's replicas that split alike
  // (which sum their slices' gradients) form, opened by its members in the plan's order.
  const std::size_t G = p.op_groups.size();
  std::vector<Subgroup> subgroups;
  auto enroll = [&](std::vector<int> ranks) {
    std::sort(ranks.begin(), ranks.end());
    if (ranks.size() < 2) return -1;
    auto same = std::find_if(subgroups.begin(), subgroups.end(),
                             [&](const Subgroup& s) { return s.ranks == ranks; });
    const int i = static_cast<int>(same - subgroups.begin());
    if (same == subgroups.end()) subgroups.push_back(Subgroup{std::move(ranks), PG()});
    return i;
  };
  std::vector<int> subgroup_of(G, -1);
  std::vector<std::vector<int>> replica_subgroup(G), place_subgroup(G);
  for (std::size_t g = 0; g < G; ++g) {
    subgroup_of[g] = enroll(at.members[g]);
    if (!at.split[g]) continue;
    for (std::size_t r = 0; r < at.by_rank[g].size(); ++r)
      replica_subgroup[g].push_back(enroll(at.replica_ranks(g, r)));
    if (!at.aligned[g]) continue;
    for (std::size_t q = 0; q < at.by_rank[g][0].size(); ++q) {
      std::vector<int> ranks;
      for (const auto& order : at.by_rank[g])
        ranks.push_back(at.members[g][static_cast<std::size_t>(order[q])]);
      place_subgroup[g].push_back(enroll(std::move(ranks)));
    }
  }
  // A tied LM head in another group than its table (on other devices, or on shared ones where
  // neither group is split: check_op_level): the copies of the table on both groups' ranks, one
  // per rank, sum their gradients.
  const auto tied = plan::tied_ops_apart(m, at.group);
  int tied_subgroup = -1;
  if (tied) {
    std::set<int> ranks;  // (a rank of both groups holds one table, which both ops use)
    for (int op : {tied->first, tied->second}) {
      const auto& in = at.members[static_cast<std::size_t>(at.group[static_cast<std::size_t>(op)])];
      ranks.insert(in.begin(), in.end());
    }
    tied_subgroup = enroll({ranks.begin(), ranks.end()});
  }
  PG world;
  std::optional<PeerWatch> watch;
  if (env.world_size > 1) {
    try {
      const auto backend = dev.is_cuda() ? Backend::nccl : Backend::gloo;
      const c10::intrusive_ptr<c10d::Store> store = connect_store(env, timeout);
      auto open = [&](const c10::intrusive_ptr<c10d::Store>& s, int rank, int size) -> PG {
        auto pg = open_group(backend, s, rank, size, env, timeout);
        if (!pg) throw std::runtime_error(pg.error().message);
        return *pg;
      };
      world = open(store, me, env.world_size);
      for (std::size_t i = 0; i < subgroups.size(); ++i)
        if (const int r = subgroups[i].rank_in(me); r >= 0)
          subgroups[i].pg =
              open(c10::make_intrusive<c10d::PrefixStore>(fmt::format("og{}/", i), store), r,
                   static_cast<int>(subgroups[i].ranks.size()));
    } catch (const std::exception& e) {
      return Error{fmt::format("cannot join the job at {}:{}: {}", env.master_addr, env.master_port,
                               failure_text(e))};
    }
    watch.emplace(env.master_addr, env.master_port, env.rank, env.world_size);
  }
  auto pg_at = [&](int i) -> Collectives* {
    return i < 0 ? nullptr : subgroups[static_cast<std::size_t>(i)].pg.get();
  };
  auto pg_of = [&](std::size_t g) { return pg_at(subgroup_of[g]); };
  // Resuming: the whole weights from the newest whole checkpoint (by the op graph's names),
  // before the split groups cut them (below, Adam's moments once the optimizer holds them).
  const ParameterNames named = parameter_names(*graph);
  const auto [resume_dir, resume_option] = resume_source(opts.resume_dir, opts.checkpoint_dir);
  const CheckpointMeta meta{0, p.global_batch, opts.seed, Naming::op_graph, {}};
  auto agreed = agreed_resume_step(resume_dir, resume_option, world.get(), dev);
  if (!agreed) return agreed.error();
  const int first_step = *agreed;
  Checkpoint ck;
  if (first_step > 0) {
    auto read =
        resume_values(resume_dir, first_step, resume_option, meta, *graph, torch::kCPU, m.name);
    if (!read) return read.error();
    ck = std::move(*read);
  }
  // Dynamic loss scaling (fp16's; also where --loss-scale asks), as the stage runtime does it: the
  // loss's gradient seeded with the scale, every rank's gradients unscaled before the step, and
  // the step skipped everywhere when any rank's overflowed; resumed where a checkpoint left it.
  std::optional<LossScaler> scaler = resumed_scaler(opts.loss_scale, ck.meta.scaler);
  const int skipped_before = scaler ? scaler->skipped() : 0;

  const std::size_t N = m.ops.size();
  const double B = static_cast<double>(p.global_batch);
  const int M = std::max(1, p.num_microbatches);
  std::vector<int> my_index(N);  // this rank's index among each op's group's members, or -1
  for (std::size_t o = 0; o < N; ++o)
    my_index[o] = Layout::index_in(at.members[static_cast<std::size_t>(at.group[o])], me);
  // Split groups this rank is in: its replica, its place among the replica's members (ascending
  // rank order, the shards' order), and its share of their ops' weights.
  std::vector<TensorParallel> tps(G);
  std::vector<int> my_replica(G, -1);
  ShardLayouts layouts;
  for (std::size_t g = 0; g < G; ++g) {
    const int j_me = Layout::index_in(at.members[g], me);
    if (!at.split[g] || j_me < 0) continue;
    const auto r = static_cast<std::size_t>(at.replica[g][static_cast<std::size_t>(j_me)]);
    my_replica[g] = static_cast<int>(r);
    static_cast<SharePlace&>(tps[g]) = at.replica_place(g, j_me);
    tps[g].group = pg_at(replica_subgroup[g][r]);
  }
  // The members at this rank's place in each replica of an aligned split group (-1: none).
  auto my_place = [&](std::size_t g) {
    return at.aligned[g] && my_replica[g] >= 0
               ? place_subgroup[g][static_cast<std::size_t>(tps[g].rank)]
               : -1;
  };
  const std::vector<FeatureCut> cuts = feature_cuts(m);  // split ops' features by rank
  for (std::size_t o = 0; o < N; ++o)
    if (const auto g = static_cast<std::size_t>(at.group[o]); at.split[g] && my_index[o] >= 0)
      shard_split_op(*graph, m.ops[o], static_cast<int>(o), tps[g], cuts[o], layouts);
  {
    std::vector<bool> held(N);
    for (std::size_t o = 0; o < N; ++o) held[o] = my_index[o] >= 0;
    graph->release_ops_except(held);
    graph->to(dev);
  }
  auto is_split = [&](std::size_t op) { return at.split[static_cast<std::size_t>(at.group[op])]; };
  // Recomputation: each segment's forward passes run without keeping what their backward passes
  // need, and again, keeping it, when the backward pass reaches the segment's last op; what only
  // the segment's own ops read is dropped in between.
  const auto segments = plan::recompute_segments(m, at.group, p.recompute);
  std::vector<int> segment_of(N, -1);
  for (std::size_t s = 0; s < segments.size(); ++s)
    for (int o : segments[s]) segment_of[static_cast<std::size_t>(o)] = static_cast<int>(s);
  // Whether every reader of op o's output is in o's segment (what the segment may drop).
  std::vector<bool> read_inside(N, false);
  for (std::size_t o = 0; o < N; ++o) read_inside[o] = segment_of[o] >= 0;
  for (std::size_t o = 0; o < N; ++o)
    for (int in : m.ops[o].inputs)
      if (segment_of[o] != segment_of[static_cast<std::size_t>(in)])
        read_inside[static_cast<std::size_t>(in)] = false;
  // Whether group g's replicas (a split group's, or a replicated group's devices) sum gradients by
  // sufficient factors, and whether op `op`'s are among them (a linear layer with its own weights
  // in such a group, on this rank).
  auto by_factors = [&](std::size_t g) {
    return p.op_groups[g].sync == plan::SyncMethod::sufficient_factor && pg_of(g) &&
           (!at.split[g] || at.by_rank[g].size() > 1);
  };
  auto factor_op = [&](std::size_t op) {
    return m.ops[op].compute.fn == model::OpFn::linear && m.ops[op].tied_params == 0 &&
           my_index[op] >= 0 && by_factors(static_cast<std::size_t>(at.group[op]));
  };
  // What member j of group g holds of linear layer o's factors: its replica's rows of every
  // micro-batch (a replicated group's members are each a replica of their own), over the input
  // features it reads and the output features it writes (all but a split layer's sharded ones).
  auto factor_holder = [&](std::size_t g, std::size_t o, int j) {
    const model::Op& op = m.ops[o];
    const auto jj = static_cast<std::size_t>(j);
    FactorHolder h;
    h.replica = at.split[g] ? at.replica[g][jj] : j;
    for (int k = 0; k < M; ++k) {
      const auto [r0, r1] = at.rows(p, static_cast<int>(g), k)[jj];
      h.rows += r1 - r0;
    }
    h.rows *= linear_rows_per_sample(op.compute);
    h.inputs = {0, op.gemm.k};
    h.outputs = {0, op.gemm.n};
    // (Split by output features like a column split: an LM head's classes.)
    const bool column = op.shard == model::ShardKind::column || op.shard == model::ShardKind::vocab,
               row = op.shard == model::ShardKind::row;
    if (!at.split[g] || !(column || row)) return h;
    const Ranges r = cut_ranges(column ? op.gemm.n : op.gemm.k, cuts[o], at.replica_place(g, j));
    (column ? h.outputs : h.inputs) = r.front();  // (one range: check_op_level)
    return h;
  };
  // Layout of op `op`'s output in its split group, and the dimension and shard counts of its
  // features over split group g's devices (its own, or the one it enters; none for QKV's three
  // sections, which check_op_level lets no op convert).
  auto out_layout = [&](std::size_t op) {
    return sim::op_layout(m.ops[op], plan::SplitKind::tensor, false).output;
  };
  auto shards_of = [&](std::size_t op, std::size_t g) {
    const auto whole = graph->output_shape(static_cast<int>(op), 1);
    const std::int64_t dim = feature_dim(whole.size());
    const FeatureCut cut = cuts[op];
    return std::make_pair(dim, cut.sections > 1
                                   ? std::vector<std::int64_t>()
                                   : cut_counts(whole[static_cast<std::size_t>(dim)], cut, tps[g]));
  };
  // The weights of the groups this rank is in, per group.
  // A tied weight (BERT's word table, which its MLM decoder reads) counts once, with the first
  // group of this rank that uses it: the table's, or on the ranks of a head kept apart (on other
  // devices), the head's, whose copy is summed with the table's below.
  std::vector<std::vector<torch::Tensor>> group_params(G);
  std::set<const void*> seen;
  for (std::size_t o = 0; o < N; ++o)
    if (my_index[o] >= 0)
      for (const auto& t : graph->op_parameters(static_cast<int>(o)))
        if (seen.insert(t.unsafeGetTensorImpl()).second)
          group_params[static_cast<std::size_t>(at.group[o])].push_back(t);
  std::vector<torch::Tensor> mine;
  for (const auto& ts : group_params) mine.insert(mine.end(), ts.begin(), ts.end());
  // A weight rebuilt from sufficient factors takes no gradient in the backward pass: the rebuild
  // computes it over every replica's rows, this rank's own included (the simulator's backward
  // pass over its own rows plus the rebuild over the others').
  for (std::size_t o = 0; o < N; ++o)
    if (factor_op(o)) graph->op_parameters(static_cast<int>(o))[0].requires_grad_(false);
  // ZeRO-1: each device of a replicated group that all-reduces its gradients (or rebuilds them
  // from sufficient factors; parameter servers step their own shards) keeps Adam's states for a
  // slice of the group's flattened weights (its index among the members in ascending rank order)
  // and steps it once the gradients are summed; the updated slices are then all-gathered. In a
  // split group of replicas that split alike, the members at each place do so over the weights'
  // slices they hold.
  struct ZeroGroup {
    std::size_t group;
    Collectives* pg;
    int members;
    ZeroSlice slice;
    torch::Tensor owned;
  };
  std::vector<ZeroGroup> zero_groups;
  std::vector<torch::Tensor> stepped;  // what Adam steps
  for (std::size_t g = 0; g < G; ++g) {
    const int sharing = at.split[g]                                                 ? my_place(g)
                        : p.op_groups[g].sync != plan::SyncMethod::parameter_server ? subgroup_of[g]
                                                                                    : -1;
    if (p.zero_stage == 1 && sharing >= 0 && pg_at(sharing) && !group_params[g].empty()) {
      const Subgroup& sub = subgroups[static_cast<std::size_t>(sharing)];
      torch::NoGradGuard no_grad;
      const torch::Tensor flat = flatten(group_params[g]);
      const auto n = static_cast<int>(sub.ranks.size());
      const ZeroSlice slice(flat.numel(), n, sub.rank_in(me));
      zero_groups.push_back(
          {g, sub.pg.get(), n, slice, flat.slice(0, slice.begin, slice.end).clone()});
      stepped.push_back(zero_groups.back().owned);
    } else {
      stepped.insert(stepped.end(), group_params[g].begin(), group_params[g].end());
    }
  }
  torch::optim::Adam adam(stepped, torch::optim::AdamOptions(opts.learning_rate));
  auto zero_of = [&](std::size_t g) -> ZeroGroup* {
    for (auto& z : zero_groups)
      if (z.group == g) return &z;
    return nullptr;
  };
  if (first_step > 0) {
    // Adam's moments of this rank's weights, cut from the whole ones; the step count the steps
    // done.
    for (std::size_t g = 0; g < G; ++g) {
      std::vector<torch::Tensor> avg, avg_sq;
      for (const auto& t : group_params[g]) {
        const auto n = named.find(t.unsafeGetTensorImpl());
        const auto it = n == named.end() ? ck.tensors.end() : ck.tensors.find(n->second.first);
        if (it == ck.tensors.end())
          return Error{fmt::format("{}: {}: step {} lacks {} (written for another model than {}?)",
                                   resume_option, resume_dir, first_step,
                                   n == named.end() ? std::string("a weight") : n->second.first,
                                   m.name)};
        avg.push_back(part_of_whole(layouts, t, it->second.exp_avg).to(dev));
        avg_sq.push_back(part_of_whole(layouts, t, it->second.exp_avg_sq).to(dev));
      }
      if (ZeroGroup* z = zero_of(g))
        set_adam_state(adam, z->owned, ck.meta.optimizer_steps(),
                       flatten(avg).slice(0, z->slice.begin, z->slice.end).clone(),
                       flatten(avg_sq).slice(0, z->slice.begin, z->slice.end).clone());
      else
        for (std::size_t i = 0; i < group_params[g].size(); ++i)
          set_adam_state(adam, group_params[g][i], ck.meta.optimizer_steps(), avg[i], avg_sq[i]);
    }
  }
  // The weights and Adam's moments after `steps` steps, whole and by name: each group's first
  // member writes its weights (a split group's first replica gathers them over its members, under
  // ZeRO-1 every member's slices of the moments first), a file per writing rank. Then, once every
  // rank has, rank 0 publishes the step.
  auto save = [&](int steps) -> Result<bool> {
    const std::string where = fmt::format("{}/step-{}", opts.checkpoint_dir, steps);
    if (auto cleared = clear_unpublished_step(world.get(), me, opts.checkpoint_dir, steps);
        !cleared)
      return cleared.error();
    try {
      torch::NoGradGuard no_grad;
      std::map<std::string, WholeTensor> out;
      for (std::size_t g = 0; g < G; ++g) {
        const std::vector<torch::Tensor>& ts = group_params[g];
        if (ts.empty()) continue;
        std::vector<torch::Tensor> avg, avg_sq;  // in this rank's layout
        if (ZeroGroup* z = zero_of(g)) {
          std::tie(avg, avg_sq) =
              gathered_moments(adam, z->owned, flatten(ts).numel(), z->slice.begin, z->slice.end,
                               *z->pg, ts, timeout);
        } else {
          for (const auto& t : ts) {
            const auto [a, b] = adam_moments(adam, t);
            avg.push_back(a);
            avg_sq.push_back(b);
          }
        }
        bool writer = at.members[g].front() == me;
        std::vector<torch::Tensor> values = ts, m1 = avg, m2 = avg_sq;
        if (at.split[g]) {
          if (my_replica[g] != 0) continue;
          writer = tps[g].rank == 0;
          auto whole = [&](const std::vector<torch::Tensor>& v) {
            if (Collectives* replica = pg_at(replica_subgroup[g][0]))
              return whole_sums(*replica, layouts, ts, v, true, tps[g].rank == 0, timeout);
            std::vector<torch::Tensor> w;
            for (std::size_t i = 0; i < ts.size(); ++i)
              w.push_back(layouts.to_whole(ts[i], v[i].detach()));
            return w;
          };
          values = whole(ts);
          m1 = whole(avg);
          m2 = whole(avg_sq);
        }
        if (!writer) continue;
        for (std::size_t i = 0; i < ts.size(); ++i) {
          const auto n = named.find(ts[i].unsafeGetTensorImpl());
          if (n == named.end()) continue;
          const auto& shape = n->second.second;
          out[n->second.first] = WholeTensor{values[i].detach().reshape(shape),
                                             m1[i].reshape(shape), m2[i].reshape(shape)};
        }
      }
      if (!out.empty()) {
        CheckpointMeta at_step = meta;
        at_step.steps = steps;
        at_step.scaler = scaler_state(scaler, ck.meta.scaler);
        write_checkpoint_part(opts.checkpoint_dir, fmt::format("rank{}", me), at_step, out);
      }
    } catch (const c10::Error& e) {
      return Error{fmt::format("--checkpoint: cannot write {}: {}", where, failure_text(e))};
    } catch (const std::filesystem::filesystem_error& e) {
      return Error{fmt::format("--checkpoint: cannot write {}: {}", where, e.what())};
    }
    return publish_when_written(world.get(), me, opts.checkpoint_dir, steps);
  };

  RunResult res;
  res.parameters = m.parameters();
  RankTimes own;
  MemoryProbe probe;  // each step's tensor memory
  const int skip = opts.steps > 2 ? 2 : 0;
  std::vector<double> own_losses;
  res.first_step = first_step;
  int step = first_step;
  const bool bert = detail::bert_module(m);  // whose stage module trains without dropout
  try {
    for (; step < first_step + opts.steps; ++step) {
      probe.start_step();
      const auto start = Clock::now();
      double comm = 0, idle = 0;
      const Batch batch = data->global(step, p.global_batch).to(dev);
      for (auto& t : mine) t.mutable_grad() = torch::Tensor();
      std::vector<torch::Tensor> masks(N);
      for (std::size_t o = 0; o < N; ++o)
        // Decoders, ViTs and BERT train without dropout, as their stage modules do: no mask.
        if (m.ops[o].compute.fn == model::OpFn::dropout && my_index[o] >= 0 &&
            m.family != model::Family::decoder_lm &&
            m.family != model::Family::vision_transformer && !bert)
          masks[o] =
              dropout_mask(m.ops[o], opts.seed, step, static_cast<int>(o), p.global_batch).to(dev);
      // Sufficient factors of the linear layers of groups that synchronise by them: per op, the
      // inputs and output gradients of this rank's rows, micro-batch by micro-batch.
      std::map<std::size_t, std::pair<std::vector<torch::Tensor>, std::vector<torch::Tensor>>>
          factors;
      std::vector<c10::intrusive_ptr<c10d::Work>> sends;
      std::vector<std::vector<torch::Tensor>> in_flight;
      int next_tag = 0;
      auto send = [&](const torch::Tensor& t, int to, int tag) {
        in_flight.push_back({t.to(torch::kFloat).contiguous()});
        sends.push_back(world->send(in_flight.back(), to, tag));
      };
      auto recv = [&](std::vector<std::int64_t> shape, int from, int tag) {
        std::vector<torch::Tensor> t{torch::empty(shape, on_dev)};
        sync();
        const auto wait_start = Clock::now();
        world->recv(t, from, tag)->wait(timeout);
        idle += seconds_since(wait_start);
        return t[0];
      };
      double loss_sum = 0;
      for (int k = 0; k < M; ++k) {
        std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> rows(G), parts(G);
        for (std::size_t g = 0; g < G; ++g) {
          rows[g] = at.rows(p, static_cast<int>(g), k);
          parts[g] = at.part_rows(p, static_cast<int>(g), k);
        }
        auto my_rows = [&](std::size_t o) {
          return rows[static_cast<std::size_t>(at.group[o])][static_cast<std::size_t>(my_index[o])];
        };
        std::vector<torch::Tensor> out(N), grad(N);
        std::vector<std::vector<torch::Tensor>> leaves(N);  // each op's inputs, as it got them
        // A factored linear layer's input rows, as it read them.
        std::vector<torch::Tensor> read_rows(N);
        // Transfers of a producer's output to another group: (producer, consumer group) -> the
        // rows this rank received (a leaf whose gradient goes back), in forward order.
        std::vector<std::pair<std::size_t, std::size_t>> transfers;
        std::map<std::pair<std::size_t, std::size_t>, torch::Tensor> received;
        // Calls f(producer rank, consumer rank, first row, end row, producer's first row,
        // consumer's first row) for each overlap of producer p's rows and group g's: the rows
        // each producer member answers for (a split group's members an interval each) and, going
        // forward, the rows each consumer member holds, going back, those it answers for.
        auto overlaps = [&](std::size_t p_op, std::size_t g, bool back, auto&& f) {
          const std::size_t pg = static_cast<std::size_t>(at.group[p_op]);
          for (std::size_t a = 0; a < at.members[pg].size(); ++a)
            for (std::size_t b = 0; b < at.members[g].size(); ++b) {
              const auto [pa0, pa1] = parts[pg][a];
              const auto [cb0, cb1] = back ? parts[g][b] : rows[g][b];
              const std::int64_t o0 = std::max(pa0, cb0), o1 = std::min(pa1, cb1);
              if (o1 > o0)
                f(at.members[pg][a], at.members[g][b], o0, o1, rows[pg][a].first, rows[g][b].first);
            }
        };
        // A split group's outputs leave it whole (replicated): converted once per op.
        std::map<std::size_t, torch::Tensor> leaving;
        auto leave = [&](std::size_t p_op) -> const torch::Tensor& {
          if (!is_split(p_op) || my_index[p_op] < 0) return out[p_op];
          auto it = leaving.find(p_op);
          if (it == leaving.end()) {
            const auto [dim, counts] = shards_of(p_op, static_cast<std::size_t>(at.group[p_op]));
            torch::NoGradGuard no_grad;
            it = leaving
                     .emplace(p_op,
                              convert(out[p_op].detach(), out_layout(p_op), sim::Layout::replicated,
                                      tps[static_cast<std::size_t>(at.group[p_op])], dim, counts))
                     .first;
          }
          return it->second;
        };
        // Op o's forward pass on this rank over its inputs `in` (which a split group's op turns
        // into the layouts it reads).
        auto forward = [&](std::size_t o, std::vector<torch::Tensor>& in) {
          std::optional<AutocastScope> mixed;
          if (mixed_precision) mixed.emplace(autocast);
          const auto g = static_cast<std::size_t>(at.group[o]);
          const model::Op& op = m.ops[o];
          const auto [r0, r1] = my_rows(o);
          const torch::Tensor mask =
              masks[o].defined() ? masks[o].slice(0, r0, r1) : torch::Tensor();
          const torch::Tensor targets = batch.targets.slice(0, r0, r1);
          if (!at.split[g]) {
            Collectives* bn = p.batch_norm == plan::BatchNormStats::synced ? pg_of(g) : nullptr;
            return graph->apply(static_cast<int>(o), in, targets, bn, mask);
          }
          // Each input in the layout this op reads (one that entered the group: whole), its
          // gradient back in the one its writer needs.
          const sim::OpLayout reads = sim::op_layout(op, plan::SplitKind::tensor, false);
          for (std::size_t i = 0; i < op.inputs.size(); ++i) {
            const auto p_op = static_cast<std::size_t>(op.inputs[i]);
            const sim::Layout from =
                at.together(p_op, g) ? out_layout(p_op) : sim::Layout::replicated;
            const auto [dim, counts] = shards_of(p_op, g);
            in[i] = relayout(in[i], from, reads.input, reads.input_grad, sim::gradient_layout(from),
                             tps[g], dim, counts);
          }
          // (Synced batch statistics over a group of several replicas: a replica's members
          // hold the same rows, which its first member counts.)
          Collectives* bn = p.batch_norm == plan::BatchNormStats::synced && at.by_rank[g].size() > 1
                                ? pg_of(g)
                                : nullptr;
          return apply_split(*graph, op, static_cast<int>(o), in, targets, mask, tps[g], bn,
                             tps[g].rank == 0);
        };
        // Forward.
        for (std::size_t o = 0; o < N; ++o) {
          const auto g = static_cast<std::size_t>(at.group[o]);
          const model::Op& op = m.ops[o];
          for (int pi : op.inputs) {
            const auto p_op = static_cast<std::size_t>(pi);
            if (at.together(p_op, g) || std::find(transfers.begin(), transfers.end(),
                                                  std::make_pair(p_op, g)) != transfers.end())
              continue;
            const int tag = next_tag++;
            transfers.emplace_back(p_op, g);
            // The pieces of this rank's rows, by their first row: the producers' intervals come
            // in the producers' order, which need not be the rows' (a split producer's members
            // answer for intervals in ascending rank order).
            std::vector<std::pair<std::int64_t, torch::Tensor>> got;
            const torch::Tensor& sent = leave(p_op);
            overlaps(p_op, g, false,
                     [&](int from, int to, std::int64_t o0, std::int64_t o1, std::int64_t pa0,
                         std::int64_t) {
                       if (from == me && to == me)
                         got.emplace_back(
                             o0, sent.slice(0, o0 - pa0, o1 - pa0).detach().to(torch::kFloat));
                       else if (from == me)
                         send(sent.slice(0, o0 - pa0, o1 - pa0).detach(), to, tag);
                       else if (to == me)
                         got.emplace_back(o0, recv(graph->output_shape(pi, o1 - o0), from, tag));
                     });
            if (Layout::index_in(at.members[g], me) >= 0) {
              std::sort(got.begin(), got.end(),
                        [](const auto& a, const auto& b) { return a.first < b.first; });
              std::vector<torch::Tensor> pieces;
              for (auto& piece : got) pieces.push_back(std::move(piece.second));
              torch::Tensor x = pieces.empty() ? torch::empty(graph->output_shape(pi, 0), on_dev)
                                               : torch::cat(pieces);
              received[{p_op, g}] = x.detach().requires_grad_(true);
            }
          }
          if (my_index[o] < 0) continue;
          const auto [r0, r1] = my_rows(o);
          std::vector<torch::Tensor> in;
          for (int pi : op.inputs) {
            const auto p_op = static_cast<std::size_t>(pi);
            in.push_back(at.together(p_op, g) ? out[p_op].detach().requires_grad_(true)
                                              : received.at({p_op, g}));
          }
          if (op.inputs.empty()) in.push_back(batch.inputs.slice(0, r0, r1));
          leaves[o] = in;
          const int seg = segment_of[o];
          {
            std::optional<torch::NoGradGuard> dropped;  // a recomputed op keeps nothing yet
            if (seg >= 0) dropped.emplace();
            out[o] = forward(o, in);
          }
          if (factor_op(o))  // the rows of its share of the input, as it read them
            read_rows[o] =
                linear_rows(*graph, op, static_cast<int>(o), in.front().detach(), tps[g]);
          // (Every device of a split group holds the whole loss: counted once.)
          if (op.compute.fn == model::OpFn::cross_entropy && (!at.split[g] || tps[g].rank == 0))
            loss_sum += out[o].item<double>() / B;
          // A segment's forward passes done: what only its own ops read is dropped.
          if (seg >= 0 && segments[static_cast<std::size_t>(seg)].back() == static_cast<int>(o))
            for (int x : segments[static_cast<std::size_t>(seg)]) {
              const auto xi = static_cast<std::size_t>(x);
              if (read_inside[xi]) out[xi] = torch::Tensor();
              for (std::size_t i = 0; i < m.ops[xi].inputs.size(); ++i)
                if (segment_of[static_cast<std::size_t>(m.ops[xi].inputs[i])] == seg)
                  leaves[xi][i] = torch::Tensor();
            }
        }
        // Backward, in reverse: first the gradients of the rows an op sent to other groups
        // come back, then its own backward pass gives its inputs' gradients.
        for (std::size_t o = N; o-- > 0;) {
          // A segment's last op: its forward passes again, from the inputs it kept.
          if (const int seg = segment_of[o];
              seg >= 0 && my_index[o] >= 0 &&
              segments[static_cast<std::size_t>(seg)].back() == static_cast<int>(o))
            for (int x : segments[static_cast<std::size_t>(seg)]) {
              const auto xi = static_cast<std::size_t>(x);
              const auto& inputs = m.ops[xi].inputs;
              for (std::size_t i = 0; i < inputs.size(); ++i)
                if (segment_of[static_cast<std::size_t>(inputs[i])] == seg)
                  leaves[xi][i] =
                      out[static_cast<std::size_t>(inputs[i])].detach().requires_grad_(true);
              std::vector<torch::Tensor> in = leaves[xi];
              out[xi] = forward(xi, in);
            }
          // A split group's output comes back whole in intervals (each member its own), which
          // its members gather before turning it into the layout of the op's gradient.
          torch::Tensor whole_back;
          bool left = false;
          for (const auto& [p_op, g] : transfers) {
            if (p_op != o) continue;
            left = true;
            const int tag = next_tag++;
            const auto pgroup = static_cast<std::size_t>(at.group[o]);
            overlaps(
                o, g, true,
                [&](int from, int to, std::int64_t o0, std::int64_t o1, std::int64_t pa0,
                    std::int64_t cb0) {
                  torch::Tensor back;
                  if (to == me) {
                    const torch::Tensor& x = received.at({o, g});
                    back = x.grad().defined()
                               ? x.grad().slice(0, o0 - cb0, o1 - cb0)
                               : torch::zeros(graph->output_shape(static_cast<int>(o), o1 - o0),
                                              on_dev);
                    if (from != me) send(back, from, tag);
                  } else if (from == me) {
                    back = recv(graph->output_shape(static_cast<int>(o), o1 - o0), to, tag);
                  }
                  if (from == me) {
                    const auto [my0, my1] = rows[pgroup][static_cast<std::size_t>(my_index[o])];
                    add_rows(at.split[pgroup] ? whole_back : grad[o],
                             graph->output_shape(static_cast<int>(o), my1 - my0), o0 - pa0, back);
                  }
                });
          }
          if (left && is_split(o) && my_index[o] >= 0) {
            const auto pgroup = static_cast<std::size_t>(at.group[o]);
            const TensorParallel& tp = tps[pgroup];
            const auto [my0, my1] = rows[pgroup][static_cast<std::size_t>(my_index[o])];
            if (!whole_back.defined())
              whole_back =
                  torch::zeros(graph->output_shape(static_cast<int>(o), my1 - my0), on_dev);
            std::vector<std::int64_t> counts;  // the replica's members' intervals, by rank
            for (int j : at.by_rank[pgroup][static_cast<std::size_t>(my_replica[pgroup])]) {
              const auto [b0, b1] = parts[pgroup][static_cast<std::size_t>(j)];
              counts.push_back(b1 - b0);
            }
            const auto [i0, i1] = parts[pgroup][static_cast<std::size_t>(my_index[o])];
            torch::NoGradGuard no_grad;
            const torch::Tensor gathered =
                gather_shards(whole_back.slice(0, i0 - my0, i1 - my0).contiguous(), tp, 0, counts);
            const auto [dim, shard_counts] = shards_of(o, pgroup);
            const torch::Tensor back =
                convert(gathered, sim::Layout::replicated, sim::gradient_layout(out_layout(o)), tp,
                        dim, shard_counts);
            grad[o] = grad[o].defined() ? grad[o] + back : back;
          }
          // (A factored layer reading the data keeps its factors though nothing of it takes a
          // gradient.)
          if (my_index[o] < 0 || (!out[o].requires_grad() && !read_rows[o].defined())) continue;
          const model::Op& op = m.ops[o];
          torch::Tensor dy =
              op.compute.fn == model::OpFn::cross_entropy
                  ? torch::full({}, (scaler ? scaler->scale() : 1.0) / B, out[o].options())
              : grad[o].defined() ? grad[o]
                                  : torch::zeros_like(out[o]);
          if (out[o].requires_grad())
            torch::autograd::backward({out[o]}, {dy.to(out[o].scalar_type())});
          const auto g = static_cast<std::size_t>(at.group[o]);
          if (read_rows[o].defined()) {
            factors[o].first.push_back(read_rows[o].to(torch::kFloat));
            factors[o].second.push_back(dy.detach().reshape({-1, dy.size(-1)}).to(torch::kFloat));
          }
          for (std::size_t i = 0; i < op.inputs.size(); ++i) {
            const auto p_op = static_cast<std::size_t>(op.inputs[i]);
            if (!at.together(p_op, g) || !leaves[o][i].grad().defined()) continue;
            add_rows(grad[p_op], out[p_op].sizes().vec(), 0, leaves[o][i].grad());
          }
          out[o] = grad[o] = torch::Tensor();
          leaves[o].clear();
        }
      }
      sync();
      auto comm_start = Clock::now();
      for (auto& w : sends) w->wait(timeout);
      // Gradient synchronisation of each group of more than one device.
      std::map<FusedKey, std::vector<torch::Tensor>> fused;
      for (std::size_t g = 0; g < G; ++g) {
        Collectives* pg = pg_of(g);
        if (!pg || group_params[g].empty()) continue;
        for (auto& t : group_params[g])
          if (!t.grad().defined()) t.mutable_grad() = torch::zeros_like(t);
        // One replica of a split group has nothing to synchronise.
        if (at.split[g] && at.by_rank[g].size() < 2) continue;
        // Linear layers synchronised by sufficient factors: gathered over the members at this
        // rank's place where the replicas split alike, else over all of the group's, each member
        // rebuilding the gradient of its slice from every replica's rows.
        std::set<const void*> summed_apart;  // weights not all-reduced with the rest
        if (by_factors(g)) {
          const int gather_at = at.split[g] && at.aligned[g] ? my_place(g) : subgroup_of[g];
          const Subgroup& gather = subgroups[static_cast<std::size_t>(gather_at)];
          for (std::size_t o = 0; o < N; ++o) {
            if (!factor_op(o) || static_cast<std::size_t>(at.group[o]) != g) continue;
            const auto& f = factors.at(o);
            std::vector<FactorHolder> holders;
            for (int rank : gather.ranks)
              holders.push_back(factor_holder(g, o, Layout::index_in(at.members[g], rank)));
            const auto [x, dy] =
                gathered_factors(*gather.pg, holders, gather.rank_in(me), torch::cat(f.first),
                                 torch::cat(f.second), timeout);
            const auto& w = graph->op_parameters(static_cast<int>(o));
            w[0].mutable_grad() = dy.t().mm(x);
            // (A row-split layer's bias: whole on every member, added by the replica's first.)
            if (w.size() > 1 &&
                (m.ops[o].shard != model::ShardKind::row || !at.split[g] || tps[g].rank == 0))
              w[1].mutable_grad() = dy.sum(0);
            for (const auto& t : w) summed_apart.insert(t.unsafeGetTensorImpl());
          }
        }
        if (tied)  // (the table's copies are summed below)
          summed_apart.insert(graph->op_parameters(tied->second)[0].unsafeGetTensorImpl());
        std::vector<torch::Tensor> rest;  // the others
        for (const auto& t : group_params[g])
          if (!summed_apart.count(t.unsafeGetTensorImpl())) rest.push_back(t);
        if (at.split[g]) {
          // The others: summed over the members at each place where the replicas split alike,
          // else in the whole layout over all of them (each replica's whole weights given once,
          // by its first member). With parameter servers, on the first replica's member at each
          // place, or the group's first device, which send the sums back.
          if (rest.empty()) continue;
          const bool served = p.op_groups[g].sync == plan::SyncMethod::parameter_server;
          if (at.aligned[g]) {
            const Subgroup& place = subgroups[static_cast<std::size_t>(my_place(g))];
            const int server = at.members[g][static_cast<std::size_t>(
                at.by_rank[g][0][static_cast<std::size_t>(tps[g].rank)])];
            if (served)
              serve_flat(*place.pg, grads_of(rest), place.rank_in(server), timeout);
            else
              all_reduce_flat(*place.pg, grads_of(rest), timeout);
          } else {
            const Subgroup& all = subgroups[static_cast<std::size_t>(subgroup_of[g])];
            all_reduce_whole(*pg, layouts, rest, true, tps[g].rank == 0, timeout,
                             served ? all.rank_in(at.members[g][0]) : -1);
          }
          continue;
        }
        // The others: fused with every group's of the same devices and synchronisation, as the
        // simulator prices them.
        const plan::OpGroup& og = p.op_groups[g];
        const Subgroup& sub = subgroups[static_cast<std::size_t>(subgroup_of[g])];
        FusedKey key{subgroup_of[g], og.sync == plan::SyncMethod::parameter_server, {}};
        if (key.served) {
          std::vector<int> servers = og.servers;
          if (servers.empty()) servers.push_back(og.devices.front());
          for (int d : servers) key.servers.push_back(sub.rank_in(Layout::index_in(at.devices, d)));
        }
        auto& fused_grads = fused[key];
        for (const auto& t : grads_of(rest)) fused_grads.push_back(t);
      }
      for (const auto& [key, grads] : fused) {
        Collectives& pg = *pg_at(key.subgroup);
        std::vector<double> bytes;
        for (const auto& t : grads) bytes.push_back(static_cast<double>(t.nbytes()));
        for (auto [first, count] : sim::gradient_buckets(bytes, p.grad_bucket_bytes)) {
          const std::vector<torch::Tensor> bucket(grads.begin() + first,
                                                  grads.begin() + first + count);
          if (!key.served)
            all_reduce_flat(pg, bucket, timeout);
          else if (key.servers.size() == 1)
            serve_flat(pg, bucket, key.servers[0], timeout);
          else
            serve_slices_flat(pg, bucket, key.servers, timeout);
        }
      }
      // The table's copies in the two groups, in the whole layout: a split group's members give
      // their rows; whole copies are given once per replica.
      if (Collectives* both = pg_at(tied_subgroup)) {
        const int op =
            my_index[static_cast<std::size_t>(tied->second)] >= 0 ? tied->second : tied->first;
        const auto g = static_cast<std::size_t>(at.group[static_cast<std::size_t>(op)]);
        const torch::Tensor& table = graph->op_parameters(tied->second)[0];
        if (!table.grad().defined()) table.mutable_grad() = torch::zeros_like(table);
        all_reduce_whole(*both, layouts, {table}, true, !at.split[g] || tps[g].rank == 0, timeout);
      }
      own_losses.push_back(loss_sum);
      for (auto& z : zero_groups)  // (the synchronisation above defined every gradient)
        z.owned.mutable_grad() =
            flatten(grads_of(group_params[z.group])).slice(0, z.slice.begin, z.slice.end).clone();
      sync();
      comm += seconds_since(comm_start);
      // Under loss scaling: what Adam steps back to its size, and whether every rank found it
      // finite (else no rank steps).
      if (!scaler || steps_everywhere(*scaler, grads_of(stepped), world.get(), dev, timeout))
        adam.step();
      sync();
      comm_start = Clock::now();
      for (auto& z : zero_groups) {  // the updated slices
        const torch::Tensor updated = gather_slices(*z.pg, z.members, z.slice, z.owned, timeout);
        torch::NoGradGuard no_grad;
        unflatten_into(updated, group_params[z.group]);
      }
      sync();
      comm += seconds_since(comm_start);
      const double step_time = seconds_since(start);
      res.step_times_s.push_back(step_time);
      res.sync_times_s.push_back(comm);
      if (step - first_step >= skip) {
        own.comm_s += comm;
        own.idle_s += idle;
        own.compute_s += std::max(0.0, step_time - comm - idle);
        own.step_peak_bytes = std::max(own.step_peak_bytes, static_cast<double>(probe.step_peak()));
      }
      const bool last_step = step + 1 == first_step + opts.steps;
      if (!opts.checkpoint_dir.empty() &&
          (last_step || (opts.checkpoint_every > 0 && (step + 1) % opts.checkpoint_every == 0)))
        if (auto saved = save(step + 1); !saved) return saved.error();
    }
    finish_run(res, own_losses, own, opts.steps, skip, world.get(), env, dev);
    if (scaler)  // every rank's (one verdict for all); this run's steps only
      res.skipped_steps = scaler->skipped() - skipped_before;
  } catch (const std::exception& e) {
    return Error{fmt::format("step {}: {}; {}", step, failure_text(e),
                             watch ? watch->who_stopped() : "no other rank")};
  }
  return res;
}

}  // namespace hetplan::runtime::detail
