// Names of the plan's enums (and of the cost enums a plan carries) in plan files and strategies.
#include <array>
#include <utility>

#include "hetplan/plan/plan.h"

namespace hetplan::plan {
namespace {

template <class E, std::size_t N>
using Table = std::array<std::pair<E, const char*>, N>;

constexpr Table<Schedule, 3> kSchedules{{
    {Schedule::gpipe, "gpipe"},
    {Schedule::one_f_one_b, "1f1b"},
    {Schedule::interleaved, "interleaved"},
}};
constexpr Table<SplitKind, 4> kSplitKinds{{
    {SplitKind::tensor, "tensor"},
    {SplitKind::replicate, "replicate"},
    {SplitKind::batch, "batch"},
    {SplitKind::batch_sharded, "batch_sharded"},
}};
constexpr Table<SyncMethod, 4> kSyncMethods{{
    {SyncMethod::all_reduce, "all_reduce"},
    {SyncMethod::parameter_server, "parameter_server"},
    {SyncMethod::sufficient_factor, "sufficient_factor"},
    {SyncMethod::none, "none"},
}};
constexpr Table<UnevenCollectives, 3> kUnevenCollectives{{
    {UnevenCollectives::automatic, "auto"},
    {UnevenCollectives::padded, "padded"},
    {UnevenCollectives::grouped, "grouped"},
}};
constexpr Table<BatchNormStats, 2> kBatchNorms{{
    {BatchNormStats::local, "local"},
    {BatchNormStats::synced, "synced"},
}};
constexpr Table<GroupMode, 3> kGroupModes{{
    {GroupMode::replicate, "replicate"},
    {GroupMode::place, "place"},
    {GroupMode::split, "split"},
}};
constexpr Table<ExecutionOrder, 2> kExecutionOrders{{
    {ExecutionOrder::fifo, "fifo"},
    {ExecutionOrder::heft, "heft"},
}};
constexpr Table<GradPriority, 3> kGradPriorities{{
    {GradPriority::none, "none"},
    {GradPriority::layer, "layer"},
    {GradPriority::layer_magnitude, "layer+magnitude"},
}};
constexpr Table<Overlap, 4> kOverlaps{{
    {Overlap::none, "none"},
    {Overlap::tp, "tp"},
    {Overlap::param, "param"},
    {Overlap::tp_param, "tp+param"},
}};
constexpr Table<Multipath, 2> kMultipaths{{
    {Multipath::ecmp, "ecmp"},
    {Multipath::spray, "spray"},
}};
constexpr Table<cost::Algorithm, 6> kAlgorithms{{
    {cost::Algorithm::automatic, "auto"},
    {cost::Algorithm::ring, "ring"},
    {cost::Algorithm::tree, "tree"},
    {cost::Algorithm::hierarchical, "hierarchical"},
    {cost::Algorithm::direct, "direct"},
    {cost::Algorithm::parameter_server, "parameter_server"},
}};
constexpr Table<cost::AdamKernels, 3> kAdamKernels{{
    {cost::AdamKernels::fused, "fused"},
    {cost::AdamKernels::foreach, "foreach"},
    {cost::AdamKernels::per_tensor, "per-tensor"},
}};
constexpr Table<cost::Loss, 2> kLosses{{
    {cost::Loss::unfused, "unfused"},
    {cost::Loss::fused, "fused"},
}};
constexpr Table<cost::Attention, 3> kAttentions{{
    {cost::Attention::plain, "plain"},
    {cost::Attention::flash, "flash"},
    {cost::Attention::flash1, "flash1"},
}};
constexpr Table<model::DType, 4> kPrecisions{{
    {model::DType::bf16, "bf16"},
    {model::DType::fp16, "fp16"},
    {model::DType::fp32, "fp32"},
    {model::DType::tf32, "tf32"},
}};
constexpr Table<cost::Recompute, 3> kRecomputes{{
    {cost::Recompute::none, "none"},
    {cost::Recompute::selective, "selective"},
    {cost::Recompute::full, "full"},
}};

template <class E, std::size_t N>
const char* name_of(const Table<E, N>& table, E e) {
  for (const auto& [value, name] : table)
    if (value == e) return name;
  return "?";
}

template <class E, std::size_t N>
std::optional<E> value_of(const Table<E, N>& table, std::string_view s) {
  for (const auto& [value, name] : table)
    if (s == name) return value;
  return std::nullopt;
}

template <class E, std::size_t N>
std::string names_of(const Table<E, N>& table) {
  std::string out;
  for (const auto& entry : table) {
    if (!out.empty()) out += '|';
    out += entry.second;
  }
  return out;
}

}  // namespace

const char* to_string(Schedule s) { return name_of(kSchedules, s); }
const char* to_string(GroupMode g) { return name_of(kGroupModes, g); }
const char* to_string(ExecutionOrder o) { return name_of(kExecutionOrders, o); }
std::optional<GroupMode> group_mode_from_string(std::string_view s) {
  return value_of(kGroupModes, s);
}
std::optional<ExecutionOrder> execution_order_from_string(std::string_view s) {
  return value_of(kExecutionOrders, s);
}
std::string group_mode_names() { return names_of(kGroupModes); }
std::string execution_order_names() { return names_of(kExecutionOrders); }
const char* to_string(SplitKind s) { return name_of(kSplitKinds, s); }
const char* to_string(SyncMethod s) { return name_of(kSyncMethods, s); }
const char* to_string(UnevenCollectives u) { return name_of(kUnevenCollectives, u); }
const char* to_string(BatchNormStats b) { return name_of(kBatchNorms, b); }
const char* algorithm_name(cost::Algorithm a) { return name_of(kAlgorithms, a); }
const char* recompute_name(cost::Recompute r) { return name_of(kRecomputes, r); }
const char* attention_name(cost::Attention a) { return name_of(kAttentions, a); }
const char* adam_name(cost::AdamKernels a) { return name_of(kAdamKernels, a); }
const char* loss_name(cost::Loss l) { return name_of(kLosses, l); }
const char* precision_name(model::DType d) { return name_of(kPrecisions, d); }
std::optional<model::DType> precision_from_string(std::string_view s) {
  return value_of(kPrecisions, s);
}

std::optional<Schedule> schedule_from_string(std::string_view s) { return value_of(kSchedules, s); }
std::optional<SplitKind> split_kind_from_string(std::string_view s) {
  return value_of(kSplitKinds, s);
}
std::optional<SyncMethod> sync_method_from_string(std::string_view s) {
  return value_of(kSyncMethods, s);
}
std::optional<UnevenCollectives> uneven_collectives_from_string(std::string_view s) {
  return value_of(kUnevenCollectives, s);
}
std::optional<BatchNormStats> batch_norm_from_string(std::string_view s) {
  return value_of(kBatchNorms, s);
}
std::optional<cost::Algorithm> algorithm_from_string(std::string_view s) {
  return value_of(kAlgorithms, s);
}
std::optional<cost::Recompute> recompute_from_string(std::string_view s) {
  return value_of(kRecomputes, s);
}
std::optional<cost::Attention> attention_from_string(std::string_view s) {
  return value_of(kAttentions, s);
}
std::optional<cost::AdamKernels> adam_from_string(std::string_view s) {
  return value_of(kAdamKernels, s);
}
std::optional<cost::Loss> loss_from_string(std::string_view s) { return value_of(kLosses, s); }

const char* to_string(GradPriority g) { return name_of(kGradPriorities, g); }
const char* to_string(Multipath m) { return name_of(kMultipaths, m); }
std::optional<GradPriority> grad_priority_from_string(std::string_view s) {
  return value_of(kGradPriorities, s);
}
std::optional<Multipath> multipath_from_string(std::string_view s) {
  return value_of(kMultipaths, s);
}
std::string grad_priority_names() { return names_of(kGradPriorities); }
const char* to_string(Overlap o) { return name_of(kOverlaps, o); }
std::optional<Overlap> overlap_from_string(std::string_view s) { return value_of(kOverlaps, s); }
std::string overlap_names() { return names_of(kOverlaps); }
std::string multipath_names() { return names_of(kMultipaths); }

std::string schedule_names() { return names_of(kSchedules); }
std::string split_kind_names() { return names_of(kSplitKinds); }
std::string sync_method_names() { return names_of(kSyncMethods); }
std::string uneven_collectives_names() { return names_of(kUnevenCollectives); }
std::string batch_norm_names() { return names_of(kBatchNorms); }
std::string algorithm_names() { return names_of(kAlgorithms); }
std::string recompute_names() { return names_of(kRecomputes); }
std::string attention_names() { return names_of(kAttentions); }
std::string adam_names() { return names_of(kAdamKernels); }
std::string loss_names() { return names_of(kLosses); }
std::string precision_names() { return names_of(kPrecisions); }

// Greedy glob with one-star backtracking: O(|pattern| * |name|) at worst, no recursion.
bool op_pattern_matches(std::string_view pattern, std::string_view op_name) {
  std::size_t p = 0, n = 0;
  std::size_t star = std::string_view::npos, resume = 0;
  while (n < op_name.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = n;
    } else if (p < pattern.size() && pattern[p] == op_name[n]) {
      ++p;
      ++n;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

SplitKind split_of(const Plan& p, std::string_view op_name) {
  for (const auto& o : p.op_overrides)
    if (op_pattern_matches(o.ops, op_name)) return o.split;
  return SplitKind::tensor;
}

}  // namespace hetplan::plan
