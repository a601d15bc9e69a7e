#include "hetplan/runtime/run.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>
#include <set>
#include <stdexcept>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <tuple>

#include "autocast_scope.h"
#include "batch_program.h"
#include "batches.h"
#include "check/stage_plan.h"
#include "checkpoint.h"
#include "chunk_transport.h"
#include "grad_buckets.h"
#include "heap.h"
#include "hetplan/plan/op_groups.h"
#include "hetplan/sim/schedule_order.h"
#include "loss_scaler.h"
#include "memory_probe.h"
#include "op_level_run.h"
#include "peer_watch.h"
#include "process_groups.h"
#include "run_result.h"
#include "run_support.h"
#include "sixteen_bit_weights.h"
#include "slice_buckets.h"
#include "tensor_parallel.h"
#include "torch_modules.h"
#include "zero_params.h"
#include "zero_slice.h"

namespace hetplan::runtime {
namespace {

using detail::alike;
using detail::batch_program_of;
using detail::Clock;
using detail::failure_text;
using detail::for_each_rank;
using detail::grads_of;
using detail::replicas_of;
using detail::samples_of;
using detail::seconds_since;
using PG = c10::intrusive_ptr<detail::Collectives>;

// Where the plan puts a rank (in for_each_rank's order). The replicas of a stage split every
// micro-batch by their batch shares, the stages split the layers, the devices of a replica split
// its ops (replicas may have different tensor-parallel degrees). Under the interleaved schedule a
// rank runs stages s, s + P, s + 2P, ... (its model chunks), as replica r and rank j of each.
struct Place {
  int S = 1, P = 1, s = 0, r = 0, j = 0;
  std::vector<int> chunks;              // the stages this rank runs, s first
  std::vector<std::vector<int>> sizes;  // [stage][replica]: its devices
  std::vector<std::vector<int>> base;   // [stage][replica]: its first rank
  std::vector<bool> aligned;            // per stage: its replicas split layers alike
  bool tied_aligned = true;             // the first and the last stage's replicas split alike
  int R() const { return static_cast<int>(sizes[s].size()); }
  bool holds(int stage) const { return stage % P == s; }
  int T() const { return sizes[s][r]; }
  int size_of(int stage, int replica) const { return sizes[stage][replica]; }
  int rank_of(int stage, int replica, int jj) const { return base[stage][replica] + jj; }
  // This rank among its stage's, and their number.
  int stage_rank() const { return base[s][r] - base[s][0] + j; }
  int stage_size(int stage) const {
    int n = 0;
    for (int t : sizes[stage]) n += t;
    return n;
  }

  explicit Place(const plan::Plan& p, int rank) {
    S = static_cast<int>(p.stages.size());
    P = detail::pipeline_size(p);
    sizes.resize(S);
    base.resize(S);
    for (int st = 0; st < S; ++st) {
      for (const auto& rep : p.stages[st].replicas)
        sizes[st].push_back(static_cast<int>(rep.devices.size()));
      base[st].assign(sizes[st].size(), 0);
      aligned.push_back(alike(replicas_of(p.stages[st])));
    }
    auto ends = replicas_of(p.stages.front());
    for (const plan::Replica* rep : replicas_of(p.stages.back())) ends.push_back(rep);
    tied_aligned = alike(ends);
    for_each_rank(p, [&](int k, int stage, int replica, int jj, int) {
      if (jj == 0) base[stage][replica] = k;
      if (k == rank) std::tie(s, r, j) = std::tie(stage, replica, jj);
    });
    for (int st = P; st < S; ++st) base[st] = base[st % P];
    for (int st = s; st < S; st += P) chunks.push_back(st);
  }
};

// The groups this rank talks in: everyone, its replica's devices (tensor parallelism), the same
// tensor-parallel rank of its stage's replicas when they split layers alike (data parallelism),
// for a tied LM head split over a pipeline, that pipeline's first and last stage, and every rank
// of the stage when a batch program splits the samples between them or when the replicas split
// layers differently (gradients then summed in the whole layout).
struct Groups {
  PG world, tensor, stage, tied, stage_all;
  PG zero3;  // the stage's replicas again, for ZeRO-3's gathers of weights
  c10::intrusive_ptr<c10d::Store> store;  // where DLCP's transport finds its peers
};

// Opens them with `backend` (throws what it cannot open).
Groups connect(const RankEnv& env, const Place& at, bool tied, bool batch_program, bool zero3,
               detail::Backend backend, std::chrono::milliseconds timeout) {
  const c10::intrusive_ptr<c10d::Store> store = detail::connect_store(env, timeout);
  auto open = [&](const c10::intrusive_ptr<c10d::Store>& s, int rank, int size) -> PG {
    auto pg = detail::open_group(backend, s, rank, size, env, timeout);
    if (!pg) throw std::runtime_error(pg.error().message);
    return *pg;
  };
  Groups g;
  g.store = store;
  g.world = open(store, env.rank, env.world_size);
  auto group = [&](const std::string& name, int rank, int size) -> PG {
    return open(c10::make_intrusive<c10d::PrefixStore>(name + "/", store), rank, size);
  };
  const bool aligned = at.aligned[at.s];
  if (at.T() > 1) g.tensor = group(fmt::format("tp{}_{}", at.s, at.r), at.j, at.T());
  if (aligned && at.R() > 1) g.stage = group(fmt::format("stage{}_{}", at.s, at.j), at.r, at.R());
  // ZeRO-3 gathers a chunk's weights for every pass, on every replica alike; the stage group's
  // bucket all-reduces start in the last micro-batch's backward pass, which a replica without
  // samples of it does not run (it sums in finish()): in one group they would meet the gathers
  // in different orders on different replicas.
  if (zero3 && aligned && at.R() > 1)
    g.zero3 = group(fmt::format("zero{}_{}", at.s, at.j), at.r, at.R());
  // Its own group even when it has the tensor group's ranks (one replica): a bucket's all-reduce
  // must not hold back the backward pass's shard gathers queued behind it in one group (Gloo runs
  // one group's calls in order; the simulator overlaps them).
  if ((batch_program || !aligned) && at.stage_size(at.s) > 1)
    g.stage_all = group(fmt::format("stage{}", at.s), at.stage_rank(), at.stage_size(at.s));
  if (tied && (at.holds(0) || at.holds(at.S - 1))) {
    if (at.tied_aligned)  // every replica of the first and of the last stage, for rank j
      g.tied = group(fmt::format("tied{}", at.j), at.holds(0) ? at.r : at.sizes[0].size() + at.r,
                     at.sizes[0].size() + at.sizes[at.S - 1].size());
    else  // every rank of both
      g.tied = group("tied", at.holds(0) ? at.stage_rank() : at.stage_size(0) + at.stage_rank(),
                     at.stage_size(0) + at.stage_size(at.S - 1));
  }
  return g;
}

}  // namespace

Result<int> newest_checkpoint_step(const std::string& dir) {
  return detail::latest_checkpoint(dir, "--checkpoint");
}

std::vector<int> rank_devices(const plan::Plan& p) {
  if (p.is_op_level()) return detail::op_level_devices(p);
  std::vector<int> out;
  for_each_rank(p, [&](int, int, int, int, int device) { out.push_back(device); });
  return out;
}

cost::UnevenForm uneven_form(const model::Model& m, const plan::Plan& p, const plan::Replica& r,
                             const cluster::Cluster* c) {
  if (p.uneven_collectives == plan::UnevenCollectives::grouped) return cost::UnevenForm::grouped;
  bool even = true;
  for (double s : r.tp_shares) even = even && s == r.tp_shares.front();
  if (p.uneven_collectives == plan::UnevenCollectives::padded || c == nullptr || even)
    return cost::UnevenForm::padded;
  // The form the simulator takes: the cheaper all-gather of one micro-batch's activations.
  cost::CollectiveRequest req;
  req.kind = cost::Collective::all_gather;
  req.devices = r.devices;
  req.shares = r.tp_shares;
  req.bytes =
      Bytes(static_cast<double>(m.seq_len * m.hidden) * model::dtype_bytes(m.dtype) *
            r.batch_share * static_cast<double>(p.global_batch) / std::max(1, p.num_microbatches));
  return cost::collective_cost(*c, req, cost::NetworkParams::defaults()).uneven_form;
}

Result<torch::Device> rank_device(const RunOptions& opts, const RankEnv& env) {
  if (!opts.cuda) return torch::Device(torch::kCPU);
  if (!torch::cuda::is_available())
    return Error{"--device cuda: this libtorch finds no CUDA device (a CPU-only build, or no GPU)"};
  const auto gpus = static_cast<int>(torch::cuda::device_count());
  if (env.local_rank >= gpus)
    return Error{fmt::format(
        "--device cuda: LOCAL_RANK is {} but this host has {} CUDA device(s); NCCL runs one rank "
        "per GPU",
        env.local_rank, gpus)};
  if (env.world_size > 1)
    if (auto nccl = detail::nccl_available(); !nccl)
      return Error{fmt::format("--device cuda: {} ranks need NCCL: {}", env.world_size,
                               nccl.error().message)};
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(env.local_rank));
}

Result<RunResult> run_plan(const model::Model& m, const plan::Plan& p, const RunOptions& opts,
                           const RankEnv& env) {
  auto ok = check_executable(m, p, env.world_size);
  if (!ok) return ok.error();
  const auto found = rank_device(opts, env);
  if (!found) return found.error();
  const torch::Device dev = *found;
  if (auto why = precision_problem(opts.precision, dev.is_cuda()); !why.empty()) return Error{why};
  if (opts.precision == model::DType::fp16 && !(opts.loss_scale > 0))
    return Error{"precision fp16: needs loss scaling (RunOptions::loss_scale above 0)"};
  // Mixed precision: each forward pass under autocast; fp16 under dynamic loss scaling.
  const bool mixed_precision =
      opts.precision != model::DType::fp32 && opts.precision != model::DType::tf32;
  // tf32: fp32 throughout, CUDA's matmuls and convolutions on the TF32 tensor cores (PyTorch's
  // allow_tf32); the CPU has no such path.
  if (dev.is_cuda() && opts.precision == model::DType::tf32) {
    at::globalContext().setAllowTF32CuBLAS(true);
    at::globalContext().setAllowTF32CuDNN(true);
  }
  const detail::AutocastState autocast = detail::AutocastState::of(opts.precision, dev.is_cuda());
  if (p.is_op_level()) return detail::run_op_level(m, p, opts, env, dev);
  const auto on_dev = torch::TensorOptions().device(dev);
  // CUDA runs asynchronously: the clock is read after the device has finished what was queued.
  auto sync = [&] {
    if (dev.is_cuda()) torch::cuda::synchronize();
  };
  torch::set_num_threads(std::max(1, opts.threads_per_rank));
  detail::keep_freed_memory();
  torch::manual_seed(opts.seed);
  // Every rank builds the module whole in host memory (the same initial weights), cuts its part
  // there and moves only that to the device (below).
  auto module = detail::build_module(m);
  if (!module) return module.error();
  auto& mod = **module;
  mod.set_recompute(p.recompute);
  mod.set_attention(p.attention);
  // Each parameter's name and whole shape, for checkpoints (the split below keeps the tensors).
  const detail::ParameterNames named = detail::parameter_names(mod);
  auto data = detail::BatchSource::create(m, opts.seed, opts.data_file);
  if (!data) return data.error();

  const Place at(p, env.rank);
  const plan::Stage& stage = p.stages[at.s];  // (its model chunks' replicas are this one's)
  auto program = batch_program_of(m, p);  // checked above
  const bool batch_program = program->has_value();
  // Whether this rank runs the first stage, the last (both in a plan of one stage).
  const bool first = at.holds(0), last = at.holds(at.S - 1);
  // Whether a tied LM head is split from its embedding: it then gets its own copy, kept equal by
  // summing the copies' gradients (as Megatron-LM does). The copies' vocabulary rows must match.
  const bool tied = at.P > 1 && mod.tied_head();
  const auto timeout = std::chrono::milliseconds(std::llround(opts.timeout_s * 1000));
  Groups groups;
  std::optional<detail::PeerWatch> watch;
  if (env.world_size > 1) {
    try {
      groups = connect(env, at, tied, batch_program, p.zero_stage == 3 && !batch_program,
                       dev.is_cuda() ? detail::Backend::nccl : detail::Backend::gloo, timeout);
    } catch (const std::exception& e) {
      return Error{fmt::format("cannot join the job at {}:{}: {}", env.master_addr, env.master_port,
                               failure_text(e))};
    }
    watch.emplace(env.master_addr, env.master_port, env.rank, env.world_size);
  }
  // Resuming: the whole parameters from the newest whole checkpoint, before the plan splits them
  // (below, Adam's moments once the optimizer holds this rank's part).
  const auto [resume_dir, resume_option] =
      detail::resume_source(opts.resume_dir, opts.checkpoint_dir);
  const detail::CheckpointMeta meta{0, p.global_batch, opts.seed, detail::Naming::module, {}};
  auto agreed = detail::agreed_resume_step(resume_dir, resume_option, groups.world.get(), dev);
  if (!agreed) return agreed.error();
  const int first_step = *agreed;
  const bool resume = first_step > 0;
  detail::Checkpoint ck;
  if (resume) {
    auto read = detail::resume_values(resume_dir, first_step, resume_option, meta, mod, torch::kCPU,
                                      m.name);
    if (!read) return read.error();
    ck = std::move(*read);
  }
  // Loss scaling goes on where a checkpoint left it (from --loss-scale if the run that wrote it did
  // not scale), counting the steps skipped before.
  std::optional<detail::LossScaler> scaler =
      detail::resumed_scaler(opts.loss_scale, ck.meta.scaler);
  const int skipped_before = scaler ? scaler->skipped() : 0;
  detail::TensorParallel tp;
  tp.group = groups.tensor.get();
  tp.rank = at.j;
  tp.size = at.T();
  tp.shares = stage.replicas[at.r].tp_shares;
  if (p.sequence_parallel && at.T() > 1) {
    auto positions = detail::unit_counts(m.seq_len, tp, "sequence positions");
    if (!positions) return positions.error();
    tp.sequence = std::move(*positions);
    tp.grouped = uneven_form(m, p, stage.replicas[at.r], opts.cluster) == cost::UnevenForm::grouped;
  }
  if (batch_program) {
    detail::BatchProgram prog;
    static_cast<detail::BatchSplits&>(prog) = std::move(**program);
    prog.group = tp;
    prog.group.grouped = p.uneven_collectives == plan::UnevenCollectives::grouped;
    if (auto split = mod.split_batch(prog); !split) return split.error();
  } else if (auto sharded = mod.shard(tp); !sharded) {
    return sharded.error();
  }
  // Batch normalisation over the whole micro-batch only when the plan asks (synced): otherwise each
  // replica normalises its own samples, as data-parallel training usually does.
  if (p.batch_norm == plan::BatchNormStats::synced) mod.set_batch_group(groups.stage.get());
  const auto [tied_source, tied_copy] =
      tied ? mod.untie_head() : std::pair<torch::Tensor, torch::Tensor>{};

  const double B = static_cast<double>(p.global_batch);
  const int M = std::max(1, p.num_microbatches);
  const int V = static_cast<int>(at.chunks.size());
  const auto order = sim::pass_order(p.schedule, V, at.s, at.P, M);

  // ZeRO-2 and -3 over replicas that split their layers alike: each replica gets only its slice of
  // the summed gradients (a reduce per slice, to its owner) instead of the all-reduce's whole sums.
  // (Over unlike replicas, with a tied head's two copies to sum first, or where the buckets would
  // hold more than the whole gradients, they sum as ZeRO-1.)
  std::vector<std::pair<int, int>> chunk_layers;  // each model chunk's first layer and count
  for (int c : at.chunks)
    chunk_layers.emplace_back(p.stages[static_cast<std::size_t>(c)].first_layer,
                              p.stages[static_cast<std::size_t>(c)].num_layers);
  const bool reduce_to_slices = p.zero_stage >= 2 && at.R() > 1 && at.aligned[at.s] &&
                                !batch_program && !tied &&
                                detail::slice_buckets_pay(detail::slice_bucket_bytes(
                                    m, chunk_layers, at.T(), p.grad_bucket_bytes));
  // This rank's parameters, model chunk by chunk, each once (one rank running both ends of a
  // tied head holds its one weight), and by layer.
  std::vector<torch::Tensor> params;
  std::vector<std::vector<torch::Tensor>> layer_params;  // [i]: the parameters of layer_ids[i]
  std::vector<int> layer_ids;
  std::vector<std::size_t> layer_chunk;               // [i]: the model chunk of layer_ids[i]
  std::vector<std::vector<std::size_t>> layer_index;  // [i]: layer_params[i] as indices into params
  std::vector<std::vector<std::size_t>> chunk_params(at.chunks.size());  // [chunk]: into params
  {
    std::set<const void*> seen;
    for (std::size_t c = 0; c < at.chunks.size(); ++c) {
      const plan::Stage& st = p.stages[static_cast<std::size_t>(at.chunks[c])];
      for (int l = st.first_layer; l < st.first_layer + st.num_layers; ++l) {
        layer_ids.push_back(l);
        layer_chunk.push_back(c);
        layer_params.emplace_back();
        layer_index.emplace_back();
        for (const auto& t : mod.layer_parameters(l, 1))
          if (seen.insert(t.unsafeGetTensorImpl()).second) {
            chunk_params[c].push_back(params.size());
            layer_index.back().push_back(params.size());
            params.push_back(t);
            layer_params.back().push_back(t);
          }
      }
    }
  }
  {
    // This rank's part only goes to the device: its stages' layers (the untied head's copy with
    // the last one). (The tensors listed above keep their identity.)
    std::vector<bool> held(static_cast<std::size_t>(mod.num_layers()), false);
    for (int l : layer_ids) held[static_cast<std::size_t>(l)] = true;
    mod.release_layers_except(held);
    mod.to_device(dev);
  }
  // ZeRO-1: replica r of a stage keeps Adam's states for slice r of the stage's flattened
  // parameters only (Adam is elementwise, so the sharded step equals the whole one), and the
  // updated slices are gathered. Replicas that split their layers differently flatten them in the
  // whole layout instead, and each of the stage's ranks keeps a slice of that. ZeRO-3 (replicas
  // that split alike, checked) keeps only the slices between passes: each model chunk's weights
  // are a part of their own, gathered whole for each pass of the chunk and released after it, as
  // the simulator prices them (a gather per pass).
  // Batch programs keep the optimizer's slices in the whole layout too: a rank holds whole weights
  // and its shards of others, as the replicas of unlike splits do. (ZeRO-3 there gathers each
  // chunk's whole weights for a pass and keeps this rank's parts of them.)
  const bool unlike = !at.aligned[at.s] && !batch_program;
  const bool whole_zero = unlike || batch_program;
  const bool zero = p.zero_stage >= 1 && at.R() > 1;
  const bool zero3 = zero && p.zero_stage == 3;
  const PG zero_group = whole_zero ? groups.stage_all : groups.stage;
  const int zero_n = whole_zero ? at.stage_size(at.s) : at.R();
  const int zero_k = whole_zero ? at.stage_rank() : at.r;
  std::vector<torch::Tensor> whole_params;  // whole_zero: the stage's parameters, whole
  // ZeRO-3's gathers: over the replicas of the same slices, or the stage's whole layout.
  const detail::WholeLayout zero3_layout =
      whole_zero ? detail::WholeLayout{&mod.layouts(), &whole_params} : detail::WholeLayout{};
  const PG zero3_group = whole_zero ? zero_group : groups.zero3;
  std::vector<detail::ZeroPart> zero_parts;  // ZeRO-3: one per model chunk, else one
  std::vector<torch::Tensor> owned;          // their slices: the optimizer's parameters
  // Mixed precision: the linear layers' and convolutions' weights in 16 bits, their fp32 master in
  // the optimizer's slices (under ZeRO-1 and -2, this rank's; else a part of one member of their
  // own, the other parameters stepped as they are), their gradients summed in fp32 (made before
  // the buckets' hooks, which a change of dtype would drop). Not where the slices are of the whole
  // layout (unlike replicas, batch programs), nor under ZeRO-3 (its slices are gathered whole).
  const bool sixteen_bits = mixed_precision && !zero3 && !whole_zero;
  const bool master_apart = sixteen_bits && !zero;  // the one-member part
  const std::vector<std::size_t> half =
      sixteen_bits ? detail::autocast_weights(mod, params) : std::vector<std::size_t>{};
  std::vector<std::size_t> rest;  // master_apart: the parameters Adam steps as they are
  if (master_apart) {
    torch::NoGradGuard no_grad;
    zero_parts.emplace_back(params, half, 1, 0);
    owned.push_back(zero_parts.back().owned);
    std::vector<bool> in_part(params.size(), false);
    for (std::size_t i : half) in_part[i] = true;
    for (std::size_t i = 0; i < params.size(); ++i)
      if (!in_part[i]) rest.push_back(i);
  }
  if (zero) {
    torch::NoGradGuard no_grad;
    if (whole_zero)  // every replica holds the same: the first one's slices, whole
      whole_params = detail::whole_sums(*zero_group, mod.layouts(), params, params, at.r == 0,
                                        at.r == 0 && at.j == 0);
    if (zero3) {
      for (const auto& in_chunk : chunk_params) {
        zero_parts.emplace_back(whole_zero ? whole_params : params, in_chunk, zero_n, zero_k);
        detail::share_storage(zero_parts.back(), params, zero_n, zero3_layout);
      }
      // Only the whole shapes are kept: the values live in the slices.
      for (auto& t : whole_params) t = torch::empty(t.sizes(), t.options().device(torch::kMeta));
    } else {
      std::vector<std::size_t> every(params.size());
      std::iota(every.begin(), every.end(), std::size_t{0});
      zero_parts.emplace_back(whole_zero ? whole_params : params, std::move(every), zero_n, zero_k);
    }
    for (const auto& part : zero_parts) owned.push_back(part.owned);
  }
  const bool sliced = zero || master_apart;  // Adam steps the parts' slices (and the rest)
  std::vector<torch::Tensor> adam_params = sliced ? owned : params;
  for (std::size_t i : rest) adam_params.push_back(params[i]);
  torch::optim::Adam adam(adam_params, torch::optim::AdamOptions(opts.learning_rate));
  std::optional<detail::SixteenBitWeights> sixteen;
  if (sixteen_bits)
    sixteen.emplace(params, half,
                    opts.precision == model::DType::fp16 ? torch::kHalf : torch::kBFloat16,
                    /*sum_gradients=*/!reduce_to_slices);
  // The stage's gradients are summed over its replicas in buckets that start while the last
  // backward pass runs (the plan's grad_bucket_bytes). Under a batch program, every rank of the
  // stage computed a part of each whole weight's gradient, and the replica's sum of each shard's:
  // the first are summed over all of them in the buckets, the second over the replicas after the
  // passes.
  std::unique_ptr<detail::GradBuckets> buckets;
  // ZeRO-2 and -3 (reduce_to_slices): each backward pass's gradients reduced to their slices'
  // owners in the same buckets, as they come.
  std::unique_ptr<detail::SliceBuckets> slice_buckets;
  const std::vector<torch::Tensor> shards = mod.sharded_parameters();
  const PG bucket_group = batch_program ? groups.stage_all : groups.stage;
  std::vector<std::vector<torch::Tensor>> layers;  // the buckets' parameters, by layer
  if (bucket_group) {
    auto is_shard = [&](const torch::Tensor& t) {
      return std::any_of(shards.begin(), shards.end(), [&](const torch::Tensor& s) {
        return s.unsafeGetTensorImpl() == t.unsafeGetTensorImpl();
      });
    };
    std::vector<double> layer_bytes;  // as the simulator counts them
    for (std::size_t i = 0; i < layer_ids.size(); ++i) {
      const int l = layer_ids[i];
      std::vector<torch::Tensor> whole;
      double whole_numel = 0;
      for (const auto& t : layer_params[i])
        if (!is_shard(t)) {
          whole.push_back(t);
          whole_numel += static_cast<double>(t.numel());
        }
      layers.push_back(std::move(whole));
      layer_bytes.push_back(batch_program
                                ? whole_numel * model::dtype_bytes(m.dtype)
                                : static_cast<double>(m.layer_parameters(l)) *
                                      model::dtype_bytes(m.dtype) / static_cast<double>(at.T()));
    }
    if (reduce_to_slices) {
      std::vector<detail::SliceBuckets::Chunk> chunks(at.chunks.size());
      for (std::size_t i = 0; i < layer_ids.size(); ++i) {
        chunks[layer_chunk[i]].layers.push_back(layer_index[i]);
        chunks[layer_chunk[i]].layer_bytes.push_back(layer_bytes[i]);
      }
      slice_buckets = std::make_unique<detail::SliceBuckets>(
          params, zero_parts, chunks, p.grad_bucket_bytes, zero_group, zero_n, zero_k, timeout);
    } else if (!detail::uses_chunk_transport(p) || batch_program) {
      buckets = std::make_unique<detail::GradBuckets>(
          layers, layer_bytes, p.grad_bucket_bytes, bucket_group,
          [&sixteen](const torch::Tensor& t) {
            return sixteen ? sixteen->accumulated(t) : t.grad();
          });
    }
  }
  // Or DLCP's transport: the same sums over the same ranks, chunk by chunk in priority order
  // after the last backward pass (chunk_transport.h).
  std::unique_ptr<detail::ChunkTransport> transport;
  if (bucket_group && !buckets && !reduce_to_slices) {
    auto addresses = detail::path_addresses(env.master_addr);
    if (!addresses) return addresses.error();
    const c10::intrusive_ptr<c10d::Store> store = groups.store;
    const detail::Rendezvous rv{
        [store](const std::string& k, const std::string& v) {
          store->set(k, std::vector<std::uint8_t>(v.begin(), v.end()));
        },
        [store](const std::string& k) {
          const auto v = store->get(k);
          return std::string(v.begin(), v.end());
        }};
    auto made = detail::ChunkTransport::connect(rv, fmt::format("dlcp/stage{}_{}", at.s, at.j),
                                                at.r, at.R(), *addresses, timeout);
    if (!made) return made.error();
    transport = std::move(*made);
  }
  detail::ChunkSyncOptions transport_opts;
  transport_opts.form = every_gradient_to_parameter_servers(p) ? detail::SyncForm::parameter_server
                                                               : detail::SyncForm::ring;
  transport_opts.timeout = timeout;
  transport_opts.drop_all = opts.grad_drop_all;
  transport_opts.spray = p.multipath == plan::Multipath::spray;
  std::vector<std::int64_t> layer_numel;
  for (const auto& l : layers) {
    std::int64_t n = 0;
    for (const auto& t : l) n += t.numel();
    layer_numel.push_back(n);
  }
  std::vector<double> chunk_mean_square;  // the last step's sums, for the magnitude order
  double dropped = 0, dropped_norm = 0;   // over the measured steps

  RunResult res;
  res.parameters = m.parameters();
  RankTimes own;
  const int skip = opts.steps > 2 ? 2 : 0;
  // The name a checkpoint gives parameter t (a tied head's copy: its source's), or null.
  const torch::Tensor head_source = tied_source, head_copy = tied_copy;
  auto name_of = [&](const torch::Tensor& t) -> const std::string* {
    const bool copy =
        head_copy.defined() && t.unsafeGetTensorImpl() == head_copy.unsafeGetTensorImpl();
    const auto it = named.find((copy ? head_source : t).unsafeGetTensorImpl());
    return it == named.end() ? nullptr : &it->second.first;
  };
  // Under ZeRO over unlike replicas or batch programs the optimizer's layout is the whole one, else
  // this rank's.
  const bool whole_layout = zero && whole_zero;
  if (resume) {
    // Adam's moments of this rank's part, cut from the whole ones; its step count the steps done.
    std::vector<torch::Tensor> avg, avg_sq;
    for (std::size_t i = 0; i < params.size(); ++i) {
      const std::string* name = name_of(params[i]);
      const auto it = name ? ck.tensors.find(*name) : ck.tensors.end();
      if (it == ck.tensors.end())
        return Error{fmt::format("{}: {}: step {} lacks {} (written for another model than {}?)",
                                 resume_option, resume_dir, first_step,
                                 name ? *name : std::string("a parameter"), m.name)};
      auto cut = [&](const torch::Tensor& w) {  // (read into host memory)
        return (whole_layout ? w.reshape(whole_params[i].sizes()).contiguous()
                             : detail::part_of_whole(mod.layouts(), params[i], w))
            .to(dev);
      };
      avg.push_back(cut(it->second.exp_avg));
      avg_sq.push_back(cut(it->second.exp_avg_sq));
    }
    // Adam counts the steps it took: not the ones loss scaling skipped.
    const std::int64_t taken = ck.meta.optimizer_steps();
    if (sliced)
      for (const auto& part : zero_parts) {
        auto slice_of = [&](const std::vector<torch::Tensor>& moments) {
          return detail::flatten(part.of(moments))
              .slice(0, part.slice.begin, part.slice.end)
              .clone();
        };
        detail::set_adam_state(adam, part.owned, taken, slice_of(avg), slice_of(avg_sq));
      }
    for (std::size_t i : rest) detail::set_adam_state(adam, params[i], taken, avg[i], avg_sq[i]);
    if (!sliced)
      for (std::size_t i = 0; i < params.size(); ++i)
        detail::set_adam_state(adam, params[i], taken, avg[i], avg_sq[i]);
  }
  // ZeRO-3: from here on each chunk's weights are whole only while a pass (or a checkpoint) needs
  // them.
  if (zero3)
    for (const auto& part : zero_parts) detail::release_part(part, params);
  // (Made after that: the CPU's allocator reports a block it frees while watched that was made
  // before.)
  detail::MemoryProbe probe;  // each step's tensor memory
  res.first_step = first_step;
  // The parameters and Adam's moments after `steps` steps, whole and by name: the first replica of
  // each stage gathers them over its tensor-parallel ranks (under ZeRO every replica's slices of
  // the moments first) and its first rank writes them (write_checkpoint_part). Then, once every
  // stage has, rank 0 publishes the step.
  // The optimizer's values of the first part's weights, whole: every member's slice gathered (the
  // one-member part's own). (ZeRO-1/2: what the step writes into the weights, a checkpoint the
  // 16-bit weights' master.)
  auto whole_part = [&] {
    const detail::ZeroPart& part = zero_parts.front();
    return master_apart
               ? part.owned
               : detail::gather_slices(*zero_group, zero_n, part.slice, part.owned, timeout);
  };
  // A flat tensor of the elements of `tensors` (in their order) as one tensor shaped as each.
  auto shaped_as = [](const std::vector<torch::Tensor>& tensors, const torch::Tensor& flat) {
    std::vector<torch::Tensor> out;
    for (const auto& t : tensors) out.push_back(torch::empty(t.sizes(), flat.options()));
    detail::unflatten_into(flat, out);
    return out;
  };
  auto save = [&](int steps) -> Result<bool> {
    const std::string where = fmt::format("{}/step-{}", opts.checkpoint_dir, steps);
    if (auto cleared = detail::clear_unpublished_step(groups.world.get(), env.rank,
                                                      opts.checkpoint_dir, steps);
        !cleared)
      return cleared.error();
    try {
      torch::NoGradGuard no_grad;
      std::vector<detail::WholeWeights> gathered;  // ZeRO-3: every chunk's weights, to write
      if (zero3)
        for (const auto& part : zero_parts)
          gathered.emplace_back(*zero3_group, zero_n, part, params, timeout, zero3_layout);
      std::vector<torch::Tensor> avg, avg_sq;  // in the optimizer's layout
      if (zero) {
        const std::vector<torch::Tensor>& shapes = whole_layout ? whole_params : params;
        avg.resize(shapes.size());
        avg_sq.resize(shapes.size());
        for (const auto& part : zero_parts) {
          const auto [a, b] =
              detail::gathered_moments(adam, part.owned, part.numel, part.slice.begin,
                                       part.slice.end, *zero_group, part.of(shapes), timeout);
          for (std::size_t i = 0; i < part.index.size(); ++i) {
            avg[part.index[i]] = a[i];
            avg_sq[part.index[i]] = b[i];
          }
        }
      } else if (master_apart) {
        const detail::ZeroPart& part = zero_parts.front();
        const auto [a, b] = detail::adam_moments(adam, part.owned);
        avg.resize(params.size());
        avg_sq.resize(params.size());
        const auto a_parts = shaped_as(part.of(params), a), b_parts = shaped_as(part.of(params), b);
        for (std::size_t k = 0; k < part.index.size(); ++k) {
          avg[part.index[k]] = a_parts[k];
          avg_sq[part.index[k]] = b_parts[k];
        }
        for (std::size_t i : rest)
          std::tie(avg[i], avg_sq[i]) = detail::adam_moments(adam, params[i]);
      } else {
        for (const auto& t : params) {
          const auto [a, b] = detail::adam_moments(adam, t);
          avg.push_back(a);
          avg_sq.push_back(b);
        }
      }
      // The weights' values: the fp32 master where the weights are 16-bit (every replica's slices).
      std::vector<torch::Tensor> weights = params;
      if (sixteen) {
        const detail::ZeroPart& part = zero_parts.front();
        const auto master = shaped_as(part.of(params), whole_part());
        for (std::size_t k = 0; k < part.index.size(); ++k) weights[part.index[k]] = master[k];
      }
      if (at.r == 0) {
        auto whole = [&](const std::vector<torch::Tensor>& values, bool already) {
          if (already) return values;
          if (!groups.tensor) {
            std::vector<torch::Tensor> out;
            for (std::size_t i = 0; i < params.size(); ++i)
              out.push_back(mod.layouts().to_whole(params[i], values[i].detach()));
            return out;
          }
          return detail::whole_sums(*groups.tensor, mod.layouts(), params, values, true, at.j == 0,
                                    timeout);
        };
        const auto values = whole(weights, false);
        const auto m1 = whole(avg, whole_layout), m2 = whole(avg_sq, whole_layout);
        if (at.j == 0) {
          std::map<std::string, detail::WholeTensor> out;
          for (std::size_t i = 0; i < params.size(); ++i) {
            if (head_copy.defined() &&
                params[i].unsafeGetTensorImpl() == head_copy.unsafeGetTensorImpl())
              continue;  // the first stage writes its source
            const auto it = named.find(params[i].unsafeGetTensorImpl());
            if (it == named.end()) continue;
            const auto& shape = it->second.second;
            out[it->second.first] = detail::WholeTensor{values[i].reshape(shape),
                                                        m1[i].reshape(shape), m2[i].reshape(shape)};
          }
          detail::CheckpointMeta at_step = meta;
          at_step.steps = steps;
          at_step.scaler = detail::scaler_state(scaler, ck.meta.scaler);
          detail::write_checkpoint_part(opts.checkpoint_dir, fmt::format("stage{}", at.s), at_step,
                                        out);
        }
      }
    } catch (const c10::Error& e) {
      return Error{fmt::format("--checkpoint: cannot write {}: {}", where, failure_text(e))};
    } catch (const std::filesystem::filesystem_error& e) {
      return Error{fmt::format("--checkpoint: cannot write {}: {}", where, e.what())};
    }
    return detail::publish_when_written(groups.world.get(), env.rank, opts.checkpoint_dir, steps);
  };
  int step = first_step;
  std::vector<double> own_losses;
  try {
    for (; step < first_step + opts.steps; ++step) {
      probe.start_step();
      const auto start = Clock::now();
      double comm = 0, idle = 0;
      const detail::Batch batch = data->global(step, p.global_batch).to(dev);
      // Gradients start undefined (PyTorch's zero_grad(set_to_none)): the first backward pass
      // writes them and later ones add, with no zeroing pass over every parameter.
      for (auto& t : params) t.mutable_grad() = torch::Tensor();
      // The plan's micro-batches through this stage in the simulator's pass order. Each loss is
      // weighted by 1/B so that the gradients summed over all replicas are the full batch's mean.
      // Between stages, each replica sends each replica of the next stage the rows of the samples
      // both hold (replicas of unlike stages split a micro-batch differently), and the gradients of
      // those rows come back.
      // [chunk * M + micro-batch]: the pass's input and output until its backward pass.
      std::vector<torch::Tensor> inputs(static_cast<std::size_t>(V * M)),
          outputs(static_cast<std::size_t>(V * M));
      std::vector<std::int64_t> first_row(static_cast<std::size_t>(V * M));  // its first sample
      // A transfer's tag: the boundary after stage `before`, the micro-batch, and the direction
      // (an interleaved schedule's ranks pass several boundaries between the same two ranks).
      auto tag_of = [&](int before, int k, bool backward) {
        return 2 * (before * M + k) + (backward ? 1 : 0);
      };
      std::vector<c10::intrusive_ptr<c10d::Work>> sends;
      std::vector<std::vector<torch::Tensor>> in_flight;  // tensors of pending sends
      auto send = [&](const torch::Tensor& t, int to, int tag) {
        in_flight.push_back({t.contiguous()});
        sends.push_back(groups.world->send(in_flight.back(), to, tag));
      };
      // Exchanges with the replicas of stage `other` whose samples of micro-batch k overlap
      // [lo, hi): each overlap's rows. Every device of a replica holds the stage's activations
      // whole; device i of the receiving replica gets them from device i mod T of the sender's.
      auto overlaps = [&](int other, int k, std::int64_t lo, std::int64_t hi) {
        std::vector<std::tuple<int, std::int64_t, std::int64_t>> out;  // replica, begin, end
        for (int q = 0; q < static_cast<int>(at.sizes[other].size()); ++q) {
          const auto [b0, b1] = samples_of(p, other, q, k);
          const std::int64_t o0 = std::max(lo, b0), o1 = std::min(hi, b1);
          if (o1 > o0) out.emplace_back(q, o0, o1);
        }
        return out;
      };
      // Rows of layer `layer`'s input (or of its gradient) from stage `other`.
      auto gather = [&](int other, int layer, int k, std::int64_t lo, std::int64_t hi, int tag) {
        std::vector<torch::Tensor> parts;
        sync();
        const auto wait_start = Clock::now();
        for (auto [q, o0, o1] : overlaps(other, k, lo, hi)) {
          std::vector<torch::Tensor> t{torch::empty(mod.activation_shape(layer, o1 - o0), on_dev)};
          groups.world->recv(t, at.rank_of(other, q, at.j % at.size_of(other, q)), tag)
              ->wait(timeout);
          parts.push_back(t[0]);
        }
        sync();
        idle += seconds_since(wait_start);  // waiting for the neighbour stage, transfer included
        return torch::cat(parts);
      };
      auto scatter = [&](const torch::Tensor& t, int other, int k, std::int64_t lo, std::int64_t hi,
                         int tag) {
        for (auto [q, o0, o1] : overlaps(other, k, lo, hi))
          for (int i = at.j; i < at.size_of(other, q); i += at.T())
            send(t.slice(0, o0 - lo, o1 - lo), at.rank_of(other, q, i), tag);
      };
      double loss_sum = 0;
      for (const sim::PassRef& pass : order) {
        const int mb = pass.microbatch;
        const int sc = at.chunks[static_cast<std::size_t>(pass.chunk)];  // the chunk's stage
        const plan::Stage& here = p.stages[static_cast<std::size_t>(sc)];
        const bool head = sc == 0, tail = sc == at.S - 1;
        const std::size_t slot = static_cast<std::size_t>(pass.chunk * M + mb);
        const auto [b0, b1] = samples_of(p, sc, at.r, mb);
        // ZeRO-3: the chunk's weights whole for the pass, gathered by every replica of the stage
        // (also one without samples of this micro-batch), and released after it.
        std::optional<detail::WholeWeights> whole;
        if (zero3) {
          sync();
          const auto gather_start = Clock::now();
          whole.emplace(*zero3_group, zero_n, zero_parts[static_cast<std::size_t>(pass.chunk)],
                        params, timeout, zero3_layout);
          sync();
          comm += seconds_since(gather_start);
        }
        if (b1 <= b0) {
          // No samples: zeros in this pass's reduces, which every replica makes.
          if (slice_buckets && !pass.forward) slice_buckets->end_pass(pass.chunk);
          continue;
        }
        const detail::Batch chunk = batch.slice(b0, b1);
        if (pass.forward) {
          torch::Tensor x =
              head ? chunk.inputs
                   : gather(sc - 1, here.first_layer, mb, b0, b1, tag_of(sc - 1, mb, false));
          if (!head) x.requires_grad_(true);
          torch::Tensor targets = chunk.targets;
          first_row[slot] = b0;
          if (batch_program) {  // this rank's samples of the replica's (one stage: first, last)
            auto counts = detail::share_counts(b1 - b0, tp);  // possibly none for this rank
            std::int64_t before = 0;
            for (int i = 0; i < at.j; ++i) before += counts[i];
            const detail::Batch mine = chunk.slice(before, before + counts[at.j]);
            if (!mod.reads_replica_samples()) x = mine.inputs, first_row[slot] += before;
            if (!mod.replica_loss()) targets = mine.targets;
            mod.set_sample_counts(std::move(counts));
          }
          mod.set_rows(opts.seed, step, p.global_batch, first_row[slot]);
          torch::Tensor out;
          {
            std::optional<detail::AutocastScope> mixed;
            if (mixed_precision) mixed.emplace(autocast);
            out = mod.forward_layers(here.first_layer, here.num_layers, x, targets);
          }
          // Between stages activations travel in fp32 (the receiver's buffers; Gloo has no bf16),
          // and their gradients come back so.
          if (!tail) out = out.to(torch::kFloat);
          if (tail) {
            out = out / B;
            loss_sum += out.item<double>();
          } else {
            scatter(out.detach(), sc + 1, mb, b0, b1, tag_of(sc, mb, false));
          }
          inputs[slot] = x;
          outputs[slot] = out;
        } else {
          if (buckets) buckets->set_active(mb == M - 1);
          mod.set_rows(opts.seed, step, p.global_batch, first_row[slot]);  // as recomputed
          if (tail && scaler)
            (outputs[slot] * scaler->scale()).backward();
          else if (tail)
            outputs[slot].backward();
          else
            outputs[slot].backward(gather(sc + 1, here.first_layer + here.num_layers, mb, b0, b1,
                                          tag_of(sc, mb, true)));
          if (buckets) buckets->set_active(false);
          if (slice_buckets) slice_buckets->end_pass(pass.chunk);
          if (!head) scatter(inputs[slot].grad(), sc - 1, mb, b0, b1, tag_of(sc - 1, mb, true));
          inputs[slot] = outputs[slot] = torch::Tensor();
        }
      }
      // The 16-bit weights' fp32 sums as the gradients of fp32 stand-ins, until the step.
      if (sixteen) sixteen->lend_gradients();
      // A parameter no pass reached (a replica with no samples this step) contributes zeros.
      // (ZeRO-2 and -3's reduces took them as zeros.)
      if (!slice_buckets)
        for (auto& t : params)
          if (!t.grad().defined()) t.mutable_grad() = torch::zeros_like(t);
      sync();
      auto comm_start = Clock::now();
      for (auto& w : sends) w->wait(timeout);
      // Gradients: summed over the stage's replicas, then over the two copies of a tied weight.
      if (buckets) buckets->finish(timeout);
      // ZeRO-2 and -3: per part, this replica's slice of the sums (the last buckets' reduces).
      const std::vector<torch::Tensor> sliced_grads =
          slice_buckets ? slice_buckets->finish() : std::vector<torch::Tensor>{};
      std::vector<double> next_mean_square;  // this step's, for the next step's order
      if (transport && !layer_numel.empty() &&
          std::accumulate(layer_numel.begin(), layer_numel.end(), std::int64_t{0}) > 0) {
        std::vector<torch::Tensor> grads;
        for (const auto& l : layers)
          for (const auto& g : grads_of(l)) grads.push_back(g);
        torch::Tensor flat = detail::flatten(grads).to(torch::kCPU, torch::kFloat).contiguous();
        auto chunks = detail::order_chunks(
            layer_numel,
            std::max<std::int64_t>(1, std::llround(opts.grad_chunk_bytes / 4 / at.T())),
            p.grad_priority, p.loss_bound, chunk_mean_square);
        if (opts.grad_one_class)
          for (auto& c : chunks)
            if (!c.droppable) c.cls = 1;
        auto summed = transport->sum(flat.data_ptr<float>(), chunks, transport_opts);
        if (!summed) throw std::runtime_error(summed.error().message);
        // (Taken for the next step's order once this step is known to step: an overflowed
        // step's squares hold infs and NaNs.)
        next_mean_square =
            detail::chunk_mean_squares(flat.data_ptr<float>(), chunks, summed->complete);
        detail::unflatten_into(flat.to(grads.front().options()), grads);
        if (step - first_step >= skip) {
          dropped += summed->dropped_fraction;
          dropped_norm += summed->dropped_norm_fraction;
        }
      }
      if (!shards.empty() && at.aligned[at.s] && groups.stage)
        detail::all_reduce_flat(*groups.stage, grads_of(shards));
      else if (!shards.empty() && !at.aligned[at.s])  // replicas sharding them differently
        detail::all_reduce_whole(*groups.stage_all, mod.layouts(), shards, true, true);
      // (Under ZeRO-1 with no tied copy to sum, the whole sums go to the optimizer's slices
      // directly, below.)
      if (unlike && !(zero && !groups.tied))
        detail::all_reduce_whole(*groups.stage_all, mod.layouts(), params, true, at.j == 0);
      // After the stage's all-reduce every replica of a stage holds its stage's sum; the first
      // replica of each stage contributes it, so every copy gets the sum of both stages.
      if (groups.tied && at.tied_aligned) {
        torch::Tensor g = (first ? tied_source : tied_copy).mutable_grad();
        if (at.r != 0) g.zero_();
        detail::all_reduce_flat(*groups.tied, {g});
      } else if (groups.tied) {
        detail::all_reduce_whole(*groups.tied, mod.layouts(), {first ? tied_source : tied_copy},
                                 at.r == 0, at.r == 0 && at.j == 0);
      }
      // This rank's part of the step's loss (the pipelines' last stages hold it); summed over the
      // ranks once, after the last step, so that no step pays a collective the plan does not have.
      // (Under a batch program each rank holds its samples' part, unless the vocabulary-parallel
      // head gives every rank the replica's.)
      own_losses.push_back(last && (at.j == 0 || (batch_program && !mod.replica_loss())) ? loss_sum
                                                                                         : 0.0);
      sync();
      comm += seconds_since(comm_start);
      // Under loss scaling: the gradients (this rank's part of the optimizer's) back to their
      // size, and whether every rank found them finite (else no rank steps).
      auto steps_now = [&](const std::vector<torch::Tensor>& grads) {
        return !scaler ||
               detail::steps_everywhere(*scaler, grads, groups.world.get(), dev, timeout);
      };
      bool stepped = true;
      if (sliced) {
        // Unlike replicas: the summed gradients whole (the stage's sums over every replica, or,
        // once summed with the tied copy, the first replica's, which every replica then holds).
        // A batch program's are summed already (buckets and shards, above): the first replica's.
        const bool every_replica = !groups.tied && !batch_program;
        const std::vector<torch::Tensor> whole_grads =
            whole_zero && !reduce_to_slices
                ? detail::whole_sums(*zero_group, mod.layouts(), params, grads_of(params),
                                     every_replica || at.r == 0,
                                     at.j == 0 && (every_replica || at.r == 0))
                : std::vector<torch::Tensor>{};
        std::vector<torch::Tensor> owned_grads;
        for (std::size_t i = 0; i < zero_parts.size(); ++i) {
          detail::ZeroPart& part = zero_parts[i];
          if (part.index.empty()) continue;  // (a model chunk without weights)
          if (reduce_to_slices) {
            part.owned.mutable_grad() = sliced_grads[i];
            owned_grads.push_back(part.owned.grad());
            continue;
          }
          const torch::Tensor flat_grads = !whole_zero ? detail::flatten(grads_of(part.of(params)))
                                                       : detail::flatten(part.of(whole_grads));
          part.owned.mutable_grad() =
              part.slice.begin == 0 && part.slice.end == flat_grads.numel()
                  ? flat_grads
                  : flat_grads.slice(0, part.slice.begin, part.slice.end).clone();
          owned_grads.push_back(part.owned.grad());
        }
        // (The 16-bit weights' fp32 sums are the optimizer's now.)
        if (sixteen)
          for (const auto& part : zero_parts)
            for (std::size_t i : part.index) params[i].mutable_grad() = torch::Tensor();
        for (std::size_t i : rest) owned_grads.push_back(params[i].grad());  // (to unscale)
        stepped = steps_now(owned_grads);
        if (stepped) adam.step();
        // The updated slices gathered into the weights (under ZeRO-3, by the next passes).
        if (!zero3) {
          sync();
          comm_start = Clock::now();
          const detail::ZeroPart& part = zero_parts.front();
          const torch::Tensor updated = whole_part();
          torch::NoGradGuard no_grad;
          if (sixteen) sixteen->restore();  // (written below, rounded to 16 bits)
          if (whole_zero) {
            detail::unflatten_into(updated, whole_params);
            for (std::size_t i = 0; i < params.size(); ++i)
              params[i].copy_(mod.layouts().to_part(params[i], whole_params[i]));
          } else {
            detail::unflatten_into(updated, part.of(params));
          }
          sync();
          comm += seconds_since(comm_start);
        }
      } else {
        stepped = steps_now(grads_of(params));
        if (stepped) adam.step();
      }
      if (stepped && !next_mean_square.empty()) chunk_mean_square = std::move(next_mean_square);
      sync();
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
    if (opts.steps > skip) {
      own.grad_dropped_fraction = dropped / (opts.steps - skip);
      own.grad_dropped_norm_fraction = dropped_norm / (opts.steps - skip);
    }
    detail::finish_run(res, own_losses, own, opts.steps, skip, groups.world.get(), env, dev);
    if (scaler)  // every rank's (one verdict for all); this run's steps only
      res.skipped_steps = scaler->skipped() - skipped_before;
  } catch (const std::exception& e) {
    // A collective or a neighbour's transfer failed or timed out: say which ranks stopped.
    return Error{fmt::format("step {}: {}; {}", step, failure_text(e),
                             watch ? watch->who_stopped() : "no other rank")};
  }
  return res;
}

}  // namespace hetplan::runtime
