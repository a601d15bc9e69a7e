#include "stage_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string_view>

#include "hetplan/plan/op_groups.h"
#include "hetplan/runtime/runnable.h"
#include "hetplan/sim/gradient_buckets.h"
#include "op_graph_check.h"
#include "resnet_shape.h"

namespace hetplan::runtime::detail {

int pipeline_size(const plan::Plan& p) {
  const int S = static_cast<int>(p.stages.size());
  if (S == 0 || p.stages[0].replicas.empty() || p.stages[0].replicas[0].devices.empty()) return S;
  const int d = p.stages[0].replicas[0].devices[0];
  for (int s = 1; s < S; ++s)
    for (const auto& rep : p.stages[s].replicas)
      if (std::find(rep.devices.begin(), rep.devices.end(), d) != rep.devices.end()) return s;
  return S;
}

bool alike(const std::vector<const plan::Replica*>& replicas) {
  for (const plan::Replica* rep : replicas)
    if (rep->devices.size() != replicas[0]->devices.size() ||
        rep->tp_shares != replicas[0]->tp_shares)
      return false;
  return true;
}
bool splits_layers(const plan::Plan& p) {
  for (const auto& st : p.stages)
    for (const auto& rep : st.replicas)
      if (rep.devices.size() > 1) return true;
  return false;
}
std::vector<const plan::Replica*> replicas_of(const plan::Stage& st) {
  std::vector<const plan::Replica*> out;
  for (const auto& rep : st.replicas) out.push_back(&rep);
  return out;
}

std::pair<std::int64_t, std::int64_t> samples_of(const plan::Plan& p, int stage, int r, int k) {
  const std::int64_t B = p.global_batch, M = std::max(1, p.num_microbatches);
  const std::int64_t lo = B * k / M, hi = B * (k + 1) / M;
  const auto& reps = p.stages[stage].replicas;
  double before = 0;
  for (int q = 0; q < r; ++q) before += reps[q].batch_share;
  const double after = r + 1 == static_cast<int>(reps.size()) ? 1.0 : before + reps[r].batch_share;
  const auto at = [&](double share) {
    return lo + std::llround(share * static_cast<double>(hi - lo));
  };
  return {at(before), at(after)};
}

std::string tensor_branch_of(std::string_view op_name) {
  constexpr std::string_view kLayers = "layers.";
  if (!op_name.starts_with(kLayers)) return "";
  const auto dot = op_name.find('.', kLayers.size());
  if (dot == std::string_view::npos || dot == kLayers.size()) return "";
  for (std::size_t i = kLayers.size(); i < dot; ++i)
    if (op_name[i] < '0' || op_name[i] > '9') return "";
  const std::string_view rest = op_name.substr(dot + 1);
  const auto sep = rest.find('.');
  if (sep == std::string_view::npos) return "";
  const std::string_view branch = rest.substr(0, sep), op = rest.substr(sep + 1);
  if (branch != "attn" && branch != "mlp" && branch != "moe") return "";
  if (op == "residual" || op == "proj_dropout" || (branch != "attn" && op == "dropout")) return "";
  return std::string(op_name.substr(0, dot + 1 + sep));
}

Result<std::optional<BatchSplits>> batch_program_of(const model::Model& m, const plan::Plan& p) {
  if (p.op_overrides.empty() || !splits_layers(p)) return std::optional<BatchSplits>{};
  BatchSplits prog;
  const model::Op* tensor_op = nullptr;
  std::vector<std::pair<const model::Op*, bool>> heads;  // the LM head and its loss: by tensor?
  const bool decoder = decoder_module(m);
  std::set<std::string> branches;         // the blocks' branches with an op split by tensor
  // Per branch, its first op that every rank computes whole (a mixture's router or combine)
  // split by tensor: alone, it does not split the branch.
  std::map<std::string, const model::Op*> whole_in_branch;
  bool by_batch = false;
  for (const model::Op& op : m.ops) {
    const plan::SplitKind split = plan::split_of(p, op.name);
    const bool vocab = op.shard == model::ShardKind::vocab;
    if (split == plan::SplitKind::replicate) {
      if (!vocab || op.kind != model::OpKind::embedding)
        return Error{fmt::format(
            "plan: op_overrides: op \"{}\" is split \"replicate\"; the runtime replicates the "
            "word embedding of a batch program, no other op yet",
            op.name)};
      prog.replicate_embedding = true;
      continue;
    }
    const bool head =
        vocab && (op.kind == model::OpKind::matmul || op.kind == model::OpKind::cross_entropy);
    if (head) heads.push_back({&op, split == plan::SplitKind::tensor});
    if (split == plan::SplitKind::tensor) {
      if (vocab && op.kind == model::OpKind::embedding)
        prog.vocab_embedding = true;
      else if (head)
        prog.vocab_head = true;
      else if (std::string branch = decoder ? tensor_branch_of(op.name) : ""; !branch.empty()) {
        if (op.shard == model::ShardKind::replicated)
          whole_in_branch.try_emplace(std::move(branch), &op);
        else
          branches.insert(std::move(branch));
      } else if (!tensor_op)
        tensor_op = &op;
      continue;
    }
    by_batch = true;
    if (split == plan::SplitKind::batch_sharded && op.params > 0)
      prog.sharded_ops.push_back(op.name);
  }
  if (!by_batch && prog.replicate_embedding)
    return Error{
        "plan: op_overrides: the word embedding is split \"replicate\" in a replica whose other "
        "ops are split by tensor; the runtime replicates it only in batch programs"};
  if (!by_batch) return std::optional<BatchSplits>{};
  for (const auto& [branch, op] : whole_in_branch)
    if (!branches.count(branch) && !tensor_op) tensor_op = op;
  if (tensor_op)
    return Error{fmt::format(
        "plan: op_overrides: op \"{}\" is split by tensor and others by batch; the runtime "
        "executes a replica's ops all split by tensor (Megatron-LM's split) or all by batch "
        "(HAP's batch programs, where the word embedding and the LM head may be split by "
        "vocabulary, and a decoder block's attention or MLP by tensor as a whole)",
        tensor_op->name)};
  // A branch goes by tensor whole: each of its ops split by tensor, but for the ops every rank
  // computes whole anyway (a mixture's router and combine), which may go by batch.
  for (const model::Op& op : m.ops) {
    const std::string branch = decoder ? tensor_branch_of(op.name) : "";
    if (branch.empty() || !branches.count(branch)) continue;
    if (plan::split_of(p, op.name) != plan::SplitKind::tensor &&
        op.shard != model::ShardKind::replicated)
      return Error{fmt::format(
          "plan: op_overrides: op \"{}\" is split {} but other ops of {} by tensor; the runtime "
          "splits a block's attention or MLP by tensor as a whole in a batch program",
          op.name, plan::to_string(plan::split_of(p, op.name)), branch)};
  }
  prog.tensor_branches.assign(branches.begin(), branches.end());
  for (const auto& [op, by_tensor] : heads)
    if (by_tensor != prog.vocab_head)
      return Error{fmt::format(
          "plan: op_overrides: op \"{}\" is {} by tensor but the LM head's other op is{}; the "
          "runtime splits the LM head and its loss by vocabulary together",
          op->name, by_tensor ? "split" : "not split", by_tensor ? " not" : "")};
  if (m.family == model::Family::cnn || m.family == model::Family::vision_transformer ||
      bert_module(m))
    return Error{fmt::format(
        "plan: op_overrides: a {}'s batch programs are executed only when every op is split "
        "\"batch\" (as data parallelism)",
        m.family == model::Family::cnn                  ? "CNN"
        : m.family == model::Family::vision_transformer ? "ViT"
                                                        : "BERT")};
  return std::optional<BatchSplits>{std::move(prog)};
}

bool uses_chunk_transport(const plan::Plan& p) {
  return !p.is_op_level() &&
         (p.grad_priority != plan::GradPriority::none || p.multipath == plan::Multipath::spray ||
          every_gradient_to_parameter_servers(p));
}

bool decoder_module(const model::Model& m) {
  return m.family == model::Family::decoder_lm || m.family == model::Family::moe_lm;
}

bool bert_module(const model::Model& m) {
  if (m.family != model::Family::encoder) return false;
  auto named = [&](std::string_view name, bool suffix) -> const model::Op* {
    for (const model::Op& op : m.ops)
      if (suffix ? op.name.ends_with(name) : op.name == name) return &op;
    return nullptr;
  };
  const model::Op* qkv = named(".qkv", true);
  const model::Op* scores = named(".scores", true);
  const model::Op* pos = named("embedding.position", false);
  const model::Op* decoder = named("head.mlm.decoder", false);
  // A block's first op its QKV GEMM: the norms come after the residual sums.
  const bool post_norm =
      m.layers.size() > 2 && m.layers[1].num_ops > 0 &&
      m.ops[static_cast<std::size_t>(m.layers[1].first_op)].kind == model::OpKind::matmul;
  return qkv && scores && !scores->compute.causal && post_norm && pos && decoder &&
         decoder->tied_params > 0 && named("head.nsp", false) && m.hidden > 0 && m.heads > 0 &&
         m.head_dim > 0 && pos->params % m.hidden == 0 && pos->params / m.hidden > m.seq_len;
}

Result<bool> executable_family(const model::Model& m) {
  if (m.family == model::Family::mlp || decoder_module(m) ||
      m.family == model::Family::vision_transformer || bert_module(m))
    return true;
  // A CNN: the ResNet module, else its op graph layer by layer (VGG, Inception).
  if (m.family == model::Family::cnn) {
    if (check_resnet(m)) return true;
    return check_layer_chain(m);
  }
  return Error{fmt::format(
      "--model: {}: the runtime has stage modules for MLPs, CNNs, ViTs, BERT and GPT- or "
      "Llama-style decoder language models (with or without a mixture of experts), not for {} "
      "models, whose plans run op by op where they convert",
      m.name, model::to_string(m.family))};
}

SliceBucketBytes slice_bucket_bytes(const model::Model& m,
                                    const std::vector<std::pair<int, int>>& chunks, int tp,
                                    double bucket_bytes) {
  SliceBucketBytes out;
  const double width = model::dtype_bytes(m.dtype);
  for (const auto& [first, count] : chunks) {
    std::vector<double> bytes;
    for (int l = first; l < first + count; ++l)
      bytes.push_back(static_cast<double>(m.layer_parameters(l)) * width / tp);
    for (const auto& [off, n] : sim::gradient_buckets(bytes, bucket_bytes)) {
      double sum = 0;
      for (int i = off; i < off + n; ++i) sum += bytes[static_cast<std::size_t>(i)];
      out.largest = std::max(out.largest, sum * 4.0 / width);
      out.whole += sum * 4.0 / width;
    }
  }
  return out;
}

bool slice_buckets_pay(const SliceBucketBytes& b) {
  return kSliceBucketsHeld * b.largest < b.whole;
}

}  // namespace hetplan::runtime::detail
