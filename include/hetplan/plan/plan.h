// The plan: one format for every planner and for the simulator and executor.
//
// A plan splits the model's layers into pipeline stages (contiguous layer ranges). Each stage runs
// on one or more data-parallel replicas; each replica is a tensor-parallel group of devices that
// shares the stage's tensor-split ops by per-device ratios (HAP-style uneven sharding) and
// processes `batch_share` of every micro-batch round (uneven data parallelism). Interleaved
// schedules list more stages than device groups: stages whose replicas use the same device set
// run on the same devices, in schedule order. Two replicas' device sets are either equal or
// disjoint.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hetplan/cost/collective_cost.h"
#include "hetplan/cost/compute_cost.h"
#include "hetplan/cost/memory_cost.h"

namespace hetplan::plan {

enum class Schedule { gpipe, one_f_one_b, interleaved };
const char* to_string(Schedule s);  // "gpipe", "1f1b", "interleaved"

// How an op's work is split across the devices of a replica.
enum class SplitKind {
  tensor,     // by the op's ShardKind (Megatron column/row/heads/vocab/expert), with tp_shares
  replicate,  // every device of the replica computes the whole op
  // The replica's samples split over its devices by tp_shares (data parallelism inside the
  // replica): whole weights on every device, their gradients all-reduced over the replica.
  batch,
  // As batch, but the weights (with their gradients and optimizer states) sharded over the
  // replica's devices by tp_shares (HAP's parameter sharding, ZeRO-3 inside the replica): each
  // forward and backward pass all-gathers them, each backward pass reduce-scatters the gradients.
  batch_sharded,
};
const char* to_string(SplitKind s);  // "tensor", "replicate", "batch", "batch_sharded"

// Gradient synchronisation of a stage's parameters across its replicas.
enum class SyncMethod { all_reduce, parameter_server, sufficient_factor, none };

// How tensor-parallel all-gathers and reduce-scatters move shards of unlike sizes (uneven
// tp_shares): padded to the largest shard in one collective, or grouped (one broadcast or reduce
// per rank, each moving that rank's shard once); automatic: whichever the cost model finds
// cheaper (cost/collective_cost.h). Plan files: "auto", "padded", "grouped".
enum class UnevenCollectives { automatic, padded, grouped };
// Where batch normalisation takes its statistics when a stage's replicas split a micro-batch:
// each replica over its own samples (local, as data-parallel training usually runs), or over the
// whole micro-batch (synced, SyncBatchNorm: an all-reduce of the statistics over the stage's
// replicas in each forward pass and one of the gradient sums in each backward pass, so that the
// step equals one device's). Plan files: "local", "synced".
enum class BatchNormStats { local, synced };
const char* to_string(
    SyncMethod s);  // "all_reduce", "parameter_server", "sufficient_factor", "none"
const char* to_string(UnevenCollectives u);  // "auto", "padded", "grouped"
const char* to_string(BatchNormStats b);     // "local", "synced"

// The names used in plan files and the strategy shorthand, and their inverses (nullopt for an
// unknown name). The cost enums get their own tables here so the plan layer does not depend on the
// cost library: Algorithm "auto", "ring", "tree", "hierarchical", "direct", "parameter_server";
// Recompute "none", "selective", "full"; Attention "plain", "flash", "flash1"; AdamKernels "fused",
// "foreach", "per-tensor"; Loss "unfused", "fused".
const char* algorithm_name(cost::Algorithm a);
const char* recompute_name(cost::Recompute r);
const char* attention_name(cost::Attention a);
const char* adam_name(cost::AdamKernels a);
const char* loss_name(cost::Loss l);
// The most losses a plan's engine may compute again per micro-batch for its metrics
// (Plan::metrics).
inline constexpr int kMaxMetrics = 8;
// A plan's precision: "bf16", "fp16", "fp32", "tf32" (no other dtype is one).
const char* precision_name(model::DType d);
std::optional<model::DType> precision_from_string(std::string_view s);
std::optional<Schedule> schedule_from_string(std::string_view s);
std::optional<SplitKind> split_kind_from_string(std::string_view s);
std::optional<SyncMethod> sync_method_from_string(std::string_view s);
std::optional<UnevenCollectives> uneven_collectives_from_string(std::string_view s);
std::optional<BatchNormStats> batch_norm_from_string(std::string_view s);
std::optional<cost::Algorithm> algorithm_from_string(std::string_view s);
std::optional<cost::Recompute> recompute_from_string(std::string_view s);
std::optional<cost::Attention> attention_from_string(std::string_view s);
std::optional<cost::AdamKernels> adam_from_string(std::string_view s);
std::optional<cost::Loss> loss_from_string(std::string_view s);
// "a|b|c": the accepted names, for error messages.
std::string schedule_names();
std::string split_kind_names();
std::string sync_method_names();
std::string uneven_collectives_names();
std::string batch_norm_names();
std::string algorithm_names();
std::string recompute_names();
std::string attention_names();
std::string adam_names();
std::string loss_names();
std::string precision_names();

// Op name patterns of op_overrides and grad_sync: '*' matches any run of characters (dots
// included), everything else matches itself. "layers.3.*", "layers.*.ln*", "*", or a full name.
bool op_pattern_matches(std::string_view pattern, std::string_view op_name);

struct Replica {
  std::vector<int> devices;       // the tensor-parallel group, in rank order
  std::vector<double> tp_shares;  // per device share of tensor-split work, sum 1; empty = even
  double batch_share = 0;         // fraction of the global batch, sum over a stage's replicas = 1
  auto operator<=>(const Replica&) const = default;
};

// Device j's share of replica r's tensor-split work: tp_shares[j], or an even part.
inline double tp_share(const Replica& r, std::size_t j) {
  return r.tp_shares.empty() ? 1.0 / static_cast<double>(r.devices.size()) : r.tp_shares[j];
}

struct Stage {
  int first_layer = 0;  // layers [first_layer, first_layer + num_layers) of Model::layers
  int num_layers = 0;
  std::vector<Replica> replicas;
  auto operator<=>(const Stage&) const = default;
};

// Per-op override of how its work is split (default: SplitKind::tensor).
struct OpOverride {
  std::string ops;  // an op name or pattern (op_pattern_matches): "layers.3.*", "layers.*.ln*"
  SplitKind split = SplitKind::tensor;
  auto operator<=>(const OpOverride&) const = default;
};

// How the gradients of matching ops are synchronised (first matching rule wins; default:
// all-reduce with the cheapest algorithm). Patterns as in OpOverride.
struct GradSync {
  std::string ops = "*";
  SyncMethod method = SyncMethod::all_reduce;
  cost::Algorithm algorithm = cost::Algorithm::automatic;
  int priority = 0;  // higher goes first on a shared link (DLCP-style layer priority)
  auto operator<=>(const GradSync&) const = default;
};

// DLCP's gradient-aware communication (Plan::grad_priority, loss_bound, multipath).
//   none: gradients synchronise in buckets in the order the backward pass produces them (output
//     side first), and each replica steps its optimizer once all of them are done (PyTorch DDP);
//   layer: gradients travel in chunks (SimOptions::grad_chunk_bytes) queued by layer, input side
//     first, and each layer's update and its next forward pass start as soon as that layer's
//     chunks are done, so the next iteration overlaps the synchronisation of this one's last
//     layers;
//   layer_magnitude: as layer, with each layer's chunks queued by their expected gradient
//     magnitude, the smallest last (sim/grad_chunks.h's model), which are what loss_bound drops.
// Plan files and strategies: "none", "layer", "layer+magnitude".
enum class GradPriority { none, layer, layer_magnitude };
// Communication the engine overlaps with computation besides the gradient buckets, as Megatron-LM
// does when asked: tensor-parallel collectives with the GEMMs next to them (tp:
// --tp-comm-overlap), and the ZeRO-1/2 all-gather of the updated parameters with the next
// iteration's first forward pass (param: --overlap-param-gather). hetplan's runtime runs both
// synchronously; the simulator prices what the plan says. Plan files and strategies: "none",
// "tp", "param", "tp+param".
enum class Overlap { none, tp, param, tp_param };
inline bool overlaps_tp(Overlap o) { return o == Overlap::tp || o == Overlap::tp_param; }
inline bool overlaps_param_gather(Overlap o) {
  return o == Overlap::param || o == Overlap::tp_param;
}
const char* to_string(Overlap o);
std::optional<Overlap> overlap_from_string(std::string_view s);
std::string overlap_names();
// How a flow between two devices with several equal routes (a leaf-spine network's spines) uses
// them: ecmp hashes each flow onto one route (so flows can collide on a spine); spray spreads
// every flow's packets over all of them. Plan files and strategies: "ecmp", "spray".
enum class Multipath { ecmp, spray };
const char* to_string(GradPriority g);
const char* to_string(Multipath m);
std::optional<GradPriority> grad_priority_from_string(std::string_view s);
std::optional<Multipath> multipath_from_string(std::string_view s);
std::string grad_priority_names();
std::string multipath_names();
// The largest loss_bound a plan may carry: DLCP bounds the gradient bytes dropped per iteration
// to keep convergence; 10% is past what its evaluation trained with.
inline constexpr double kMaxLossBound = 0.1;

// Op-level plans (HeteroG, TAG): instead of pipeline stages, the model's ops are partitioned into
// groups, each run on its own set of devices.
//   replicate: every device of the group runs all of the group's ops on its `shares` of each
//     micro-batch's samples (even when `shares` is empty), holds the group's weights whole and
//     synchronises their gradients over the group by `sync`;
//   place: the group's one device runs its ops on every sample (model parallelism);
//   split: every device of the group runs every sample (of its replica, OpGroup::replica_sizes)
//     through its `shares` of each op's tensor dimension (tensor parallelism as Megatron-LM splits
//     a layer: matmul weights by output or input features, attention by heads, convolutions by
//     output channels; ops without such a dimension, norms and elementwise ops, computed whole on
//     every device) and holds that share of the weights: activations change layout inside the
//     group by the collectives of sim/tensor_layout.h (HAP's uneven shares: `shares` may differ);
//     one replica synchronises nothing, several all-reduce their gradients.
// Plan files: "replicate", "place", "split".
enum class GroupMode { replicate, place, split };
const char* to_string(GroupMode g);
std::optional<GroupMode> group_mode_from_string(std::string_view s);
std::string group_mode_names();

// The order in which a device runs its ready ops in an op-level plan: in the order they became
// ready (fifo), or by HEFT's upward rank, the longest path of compute and transfer time from the
// op to the end of the iteration (heft, HeteroG), among the ready ops of the earliest micro-batch.
// Plan files: "fifo", "heft".
enum class ExecutionOrder { fifo, heft };
const char* to_string(ExecutionOrder o);
std::optional<ExecutionOrder> execution_order_from_string(std::string_view s);
std::string execution_order_names();

struct OpGroup {
  // Op names or patterns (op_pattern_matches); together the groups name every op exactly once.
  std::vector<std::string> ops;
  std::vector<int> devices;  // distinct; exactly one for place
  // replicate: per device share of each micro-batch; split: per device share of each op's tensor
  // dimension; sum 1; empty = even
  std::vector<double> shares;
  GroupMode mode = GroupMode::replicate;
  // replicate: how the group's weight gradients are synchronised over its devices. all_reduce
  // with `algorithm`; parameter_server with the parameters sharded evenly over `servers` (devices
  // of the group; empty: the group's first device), each pushing and pulling its share;
  // sufficient_factor for the group's matmul weights (the others all-reduced).
  SyncMethod sync = SyncMethod::all_reduce;
  cost::Algorithm algorithm = cost::Algorithm::automatic;
  std::vector<int> servers;
  // split: the devices form consecutive replicas of these sizes (empty: one replica of all of
  // them), each running its batch_shares share of every micro-batch (empty = even) split by tensor
  // dimension over its devices at their `shares` (which then sum to 1 within each replica); the
  // replicas all-reduce their weight gradients.
  std::vector<int> replica_sizes;
  std::vector<double> batch_shares;
  auto operator<=>(const OpGroup&) const = default;
};

// Caps on a plan's sizes, far past any published training run (the largest batches trained are
// about 64 Ki samples; Megatron-LM's largest runs take a few hundred micro-batches per
// iteration), so that a mistyped value gets an error instead of hours of simulation and memory.
inline constexpr std::int64_t kMaxGlobalBatch = std::int64_t{1} << 20;
inline constexpr int kMaxMicrobatches = 1 << 16;

struct Plan {
  std::string model;              // informative: the model spec it was made for
  std::string cluster;            // informative: the cluster it was made for
  std::string planner;            // which planner (or "strategy") produced it
  std::int64_t global_batch = 0;  // samples per iteration
  int num_microbatches = 1;       // micro-batch rounds per iteration (per pipeline)
  Schedule schedule = Schedule::one_f_one_b;
  cost::Recompute recompute = cost::Recompute::none;
  // The attention core op by op, or as one fused kernel (FlashAttention; stage plans only: an
  // op-level plan places the core's ops one by one).
  cost::Attention attention = cost::Attention::plain;
  // The arithmetic it trains in: bf16 or fp16 mixed precision (16-bit GEMMs and activations,
  // fp32 master weights and Adam state) or fp32. Unset: the model's own dtype (its spec's dtype=,
  // bf16 for the zoo), and the runtime's --precision. Set: the commands cost the model rebuilt in
  // that dtype (sim::simulate costs the model it is given) and the runtime trains in it.
  std::optional<model::DType> precision;
  // How the engine runs the Adam step: one fused kernel (Megatron-LM, DeepSpeed), PyTorch's
  // multi-tensor foreach passes, or its loop tensor by tensor (cost::AdamKernels). The simulator
  // prices it; hetplan's runtime runs libtorch's own step whatever it says.
  cost::AdamKernels adam = cost::AdamKernels::fused;
  // How the engine computes the loss: op by op in fp32 (PyTorch, Megatron-LM) or fused into one
  // kernel per pass (flash-attn's cross entropy; cost::Loss). The simulator prices its time and
  // memory; hetplan's runtime computes it op by op whatever it says.
  cost::Loss loss = cost::Loss::unfused;
  // Losses the engine computes again per micro-batch from the logits, without gradients, for its
  // training metrics: Composer (llm-foundry's trainer) updates LanguageCrossEntropy and
  // LanguagePerplexity every micro-batch, each torch's cross entropy under autocast, so 2 there; 0
  // for Megatron-LM, DeepSpeed and hetplan's runtime. Each is priced as the unfused loss's forward
  // pass (the logits cast to fp32, then log-softmax) on the devices holding the loss.
  // 0..kMaxMetrics.
  int metrics = 0;
  Overlap overlap = Overlap::none;  // stage plans only
  int zero_stage = 0;               // 0..3, over each stage's replicas
  bool sequence_parallel = false;
  UnevenCollectives uneven_collectives = UnevenCollectives::automatic;
  BatchNormStats batch_norm = BatchNormStats::local;
  double grad_bucket_bytes = 25e6;  // gradient all-reduce bucket size (overlap with backward)
  // DLCP (above): the order of gradient chunks on the network, the fraction of each iteration's
  // gradient bytes that may be dropped when late (0..kMaxLossBound; needs a grad_priority), and
  // the use of equal routes.
  GradPriority grad_priority = GradPriority::none;
  double loss_bound = 0;
  Multipath multipath = Multipath::ecmp;
  std::vector<Stage> stages;        // in model order; together they cover every layer exactly once
  std::vector<OpOverride> op_overrides;
  std::vector<GradSync> grad_sync;
  // An op-level plan: its op groups (then `stages`, `op_overrides` and `grad_sync` are empty) and
  // the order in which each device runs its ready ops.
  std::vector<OpGroup> op_groups;
  ExecutionOrder execution_order = ExecutionOrder::heft;
  bool is_op_level() const { return !op_groups.empty(); }
  auto operator<=>(const Plan&) const = default;
};

// How the plan splits an op with this name: its first matching op override, else tensor.
SplitKind split_of(const Plan& p, std::string_view op_name);

// The index of the stage that holds model layer `layer`; -1 when none does.
int stage_of_layer(const Plan& p, int layer);

}  // namespace hetplan::plan
