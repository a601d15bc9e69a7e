#include "hetplan/runtime/runnable.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <set>

#include "hetplan/plan/op_groups.h"
#include "op_level_layout.h"
#include "shares.h"
#include "stage_plan.h"

namespace hetplan::runtime {

using detail::alike;
using detail::batch_program_of;
using detail::replicas_of;
using detail::samples_of;
using detail::splits_layers;

bool every_gradient_to_parameter_servers(const plan::Plan& p) {
  return std::all_of(p.grad_sync.begin(), p.grad_sync.end(),
                     [](const plan::GradSync& g) {
                       return g.method == plan::SyncMethod::parameter_server;
                     }) &&
         std::any_of(p.grad_sync.begin(), p.grad_sync.end(),
                     [](const plan::GradSync& g) { return g.ops == "*"; });
}

plan::RunForm executable_form(const model::Model& m, const plan::Plan& p, int world_size) {
  plan::RunForm form = plan::run_form(p, m);
  if (form.stages_from_op_level > 0 && !check_executable(m, form.plan, world_size) &&
      detail::check_op_level(m, p, world_size))
    form = plan::RunForm{p};
  // Stage plans without a stage module for the model, or with a form the stage runtime does not
  // run (a ResNet under tensor parallelism), run op by op where they convert.
  // (Not a plan with a loss bound: the runtime drops no gradients either way.)
  if (!form.plan.is_op_level() && form.plan.loss_bound <= 0 &&
      (!detail::executable_family(m) || !check_executable(m, form.plan, world_size)))
    if (auto ops = plan::as_op_level_plan(form.plan, m);
        ops && detail::check_op_level(m, *ops, world_size)) {
      form.plan = std::move(*ops);
      form.op_level_from_stages = true;
    }
  return form;
}

std::string why_not_runnable(const model::Model& m, const plan::Plan& p) {
  const int world = static_cast<int>(plan::plan_devices(p).size());
  const plan::Plan form = executable_form(m, p, world).plan;
  auto ok = check_executable(m, form, world);
  if (!ok) return ok.error().message;
  // (On the GPUs it plans for.)
  if (p.precision) return precision_problem(*p.precision, true);
  return "";
}

namespace {

// What a tensor-parallel split of a block's MLP divides: its experts, or its columns.
std::pair<std::int64_t, const char*> ffn_units(const model::Model& m) {
  if (m.experts > 0) return {m.experts, "experts"};
  return {m.ffn_hidden, "MLP columns"};
}

// Settings of a stage plan the runtime refuses whatever else the plan holds: check_executable
// meets them in its order, executable_problems lists each.

// A CNN's replica of more than one device: the stage runtime splits no convolutions (op by op,
// a stage of such replicas runs as a split group, where plan::as_op_level_plan converts it).
std::optional<Error> cnn_tensor_problem(const model::Model& m, const plan::Plan& p) {
  if (m.family != model::Family::cnn) return std::nullopt;
  for (std::size_t s = 0; s < p.stages.size(); ++s)
    for (std::size_t r = 0; r < p.stages[s].replicas.size(); ++r)
      if (p.stages[s].replicas[r].devices.size() > 1)
        return Error{fmt::format(
            "plan: stages[{}].replicas[{}].devices: a CNN's replicas of several devices run only "
            "op by op (its convolutions in a split group of the stage's replicas, or split by "
            "batch where op_overrides say so), where the plan converts",
            s, r)};
  return std::nullopt;
}

// The stages of an interleaved schedule past the first P (pipeline_size): stage s runs on the ranks
// of stage s mod P, which shard every layer alike (the module is split once), so its replicas must
// be theirs, devices in the same order, with the same tp_shares.
std::optional<Error> lane_problem(const plan::Plan& p, int P) {
  if (P < static_cast<int>(p.stages.size()) && p.schedule != plan::Schedule::interleaved)
    return Error{fmt::format(
        "plan: stages[{}]: runs on the devices of stages[0]; only the interleaved schedule runs "
        "several stages on one device",
        P)};
  if (P == 1 && p.stages.size() > 1)
    return Error{
        "plan: stages: every stage runs on the devices of stages[0]; the stage runtime runs the "
        "interleaved schedule over two pipeline positions or more (one rank passes nothing to "
        "itself)"};
  for (int s = P; s < static_cast<int>(p.stages.size()); ++s) {
    const plan::Stage& st = p.stages[static_cast<std::size_t>(s)];
    const plan::Stage& runs_on = p.stages[static_cast<std::size_t>(s % P)];
    bool same = st.replicas.size() == runs_on.replicas.size();
    for (std::size_t r = 0; same && r < st.replicas.size(); ++r)
      same = st.replicas[r].devices == runs_on.replicas[r].devices &&
             st.replicas[r].tp_shares == runs_on.replicas[r].tp_shares;
    if (!same)
      return Error{fmt::format(
          "plan: stages[{}].replicas: under the interleaved schedule stage {} runs on the ranks of "
          "stages[{}], which split every model chunk they hold alike (expected its replicas: the "
          "same devices in the same order, with the same tp_shares)",
          s, s, s % P)};
  }
  return std::nullopt;
}

std::optional<Error> transport_problem(const model::Model& m, const plan::Plan& p) {
  const bool needed = p.loss_bound > 0 || every_gradient_to_parameter_servers(p);
  if (!needed) return std::nullopt;
  const std::string what = p.loss_bound > 0 ? fmt::format("loss_bound: {:g}", p.loss_bound)
                                            : std::string("grad_sync: parameter_server");
  if (p.is_op_level())
    return Error{fmt::format(
        "plan: {}: DLCP's transport carries stage plans' gradients, not an op-level plan's", what)};
  for (std::size_t s = 0; s < p.stages.size(); ++s)
    if (p.stages[s].replicas.size() > 1 && !alike(replicas_of(p.stages[s])))
      return Error{fmt::format(
          "plan: {}: stages[{}]: replicas that split layers differently sum gradients in the whole "
          "layout, which DLCP's transport does not carry (expected replicas with the same "
          "tensor-parallel degree and shares)",
          what, s)};
  if (auto program = batch_program_of(m, p); program && *program)
    return Error{fmt::format(
        "plan: {}: a batch program's gradients are summed over every rank of a stage, which "
        "DLCP's transport does not carry",
        what)};
  return std::nullopt;
}

std::optional<Error> sync_problem(const plan::Plan& p) {
  if (every_gradient_to_parameter_servers(p)) return std::nullopt;  // DLCP's transport carries them
  for (std::size_t i = 0; i < p.grad_sync.size(); ++i)
    if (p.grad_sync[i].method != plan::SyncMethod::all_reduce)
      return Error{fmt::format(
          "plan: grad_sync[{}].method: {} is not executed yet (the runtime all-reduces gradients, "
          "or sends them through parameter servers when every rule says so)",
          i, plan::to_string(p.grad_sync[i].method))};
  return std::nullopt;
}

}  // namespace

Result<bool> check_executable(const model::Model& m, const plan::Plan& p, int world_size) {
  if (auto e = transport_problem(m, p)) return *e;
  if (p.is_op_level()) return detail::check_op_level(m, p, world_size);
  if (auto family = detail::executable_family(m); !family) return family.error();
  // Ranks: the devices of the first pipeline_size stages, each once; the later stages of an
  // interleaved schedule run on them (lane_problem).
  const int P = detail::pipeline_size(p);
  std::set<int> devices;
  for (std::size_t s = 0; s < static_cast<std::size_t>(P); ++s) {
    const auto& replicas = p.stages[s].replicas;
    for (std::size_t r = 0; r < replicas.size(); ++r) {
      for (int d : replicas[r].devices)
        if (!devices.insert(d).second)
          return Error{fmt::format(
              "plan: stages[{}].replicas[{}].devices: device {} runs more than one stage (only "
              "the interleaved schedule runs several, each model chunk P stages apart)",
              s, r, d)};
    }
  }
  if (auto e = lane_problem(p, P)) return *e;
  if (static_cast<int>(devices.size()) != world_size)
    return Error{fmt::format(
        "plan: stages: the plan runs on {} devices (one rank each) but the job has {} ranks "
        "(start it with --nprocs {}, or as {} torchrun ranks)",
        devices.size(), world_size, devices.size(), devices.size())};
  if (auto e = cnn_tensor_problem(m, p)) return *e;
  const bool decoder = detail::decoder_module(m);
  if (splits_layers(p) && p.sequence_parallel && !decoder)
    return Error{fmt::format(
        "plan: sequence_parallel: the runtime splits decoder language models by sequence; a {} "
        "model is not",
        model::to_string(m.family))};
  auto program = batch_program_of(m, p);
  if (!program) return program.error();
  if (*program) {
    if (p.stages.size() > 1)
      return Error{
          "plan: stages: a batch program (ops split by batch inside a replica) is executed on one "
          "pipeline stage; pipelines of them are not executed yet"};
    if (p.sequence_parallel)
      return Error{"plan: sequence_parallel: a batch program splits samples, not sequences"};
    // A rank the shares leave without samples of a micro-batch still runs its passes, on none,
    // and takes part in their collectives; each needs vocabulary rows when they are split.
    for (std::size_t r = 0; r < p.stages[0].replicas.size(); ++r) {
      detail::SharePlace group;
      group.size = static_cast<int>(p.stages[0].replicas[r].devices.size());
      group.shares = p.stages[0].replicas[r].tp_shares;
      if ((*program)->vocab_embedding || (*program)->vocab_head)
        if (auto ok = detail::unit_counts(m.vocab, group, "vocabulary rows"); !ok)
          return ok.error();
      // And of a branch split by tensor, its heads, MLP columns or experts.
      bool attention = false, ffn = false;
      for (const std::string& b : (*program)->tensor_branches)
        (b.ends_with(".attn") ? attention : ffn) = true;
      if (attention)
        if (auto ok = detail::unit_counts(m.kv_heads, group, "key/value heads"); !ok)
          return ok.error();
      if (ffn) {
        const auto [n, what] = ffn_units(m);
        if (auto ok = detail::unit_counts(n, group, what); !ok) return ok.error();
      }
    }
  }
  // Uneven shares are rounded to whole heads, MLP columns, vocabulary rows (and sequence
  // positions): each rank needs one. (A ViT's and BERT's blocks split as a decoder's; their
  // embeddings and heads stay whole.)
  const bool blocks = m.family == model::Family::vision_transformer || detail::bert_module(m);
  if ((decoder || blocks) && !*program)
    for (const auto& st : p.stages)
      for (const auto& rep : st.replicas) {
        if (rep.devices.size() < 2) continue;
        detail::SharePlace tp;
        tp.size = static_cast<int>(rep.devices.size());
        tp.shares = rep.tp_shares;
        std::vector<std::pair<std::int64_t, const char*>> units{{m.kv_heads, "key/value heads"},
                                                                ffn_units(m)};
        if (decoder) units.push_back({m.vocab, "vocabulary rows"});
        for (auto [n, what] : units)
          if (auto ok = detail::unit_counts(n, tp, what); !ok) return ok.error();
        if (p.sequence_parallel)
          if (auto ok = detail::unit_counts(m.seq_len, tp, "sequence positions"); !ok)
            return ok.error();
      }
  // Batch normalisation reduces its statistics over a stage's replicas in every micro-batch, so
  // each replica must take part in each: at least one sample of every micro-batch.
  if (m.family == model::Family::cnn)
    for (std::size_t s = 0; s < p.stages.size(); ++s)
      for (std::size_t r = 0; r < p.stages[s].replicas.size() && p.stages[s].replicas.size() > 1;
           ++r)
        for (int k = 0; k < std::max(1, p.num_microbatches); ++k)
          if (const auto [b0, b1] = samples_of(p, static_cast<int>(s), static_cast<int>(r), k);
              b1 <= b0)
            return Error{fmt::format(
                "plan: stages[{}].replicas[{}].batch_share: this replica gets no sample of "
                "micro-batch {}; a CNN's replicas share batch statistics, so each needs at least "
                "one sample of every micro-batch (fewer micro-batches or a larger share)",
                s, r, k)};
  if (auto e = sync_problem(p)) return *e;
  return true;
}

std::vector<std::string> executable_problems(const model::Model& m, const plan::Plan& p,
                                             int world_size) {
  std::vector<std::string> out;
  auto first = check_executable(m, p, world_size);
  if (first) return out;
  out.push_back(first.error().message);
  if (p.is_op_level()) return out;
  for (const auto& e : {cnn_tensor_problem(m, p), sync_problem(p)})
    if (e && e->message != out.front()) out.push_back(e->message);
  // And why it does not run op by op either.
  if (const auto ops = plan::as_op_level_plan(p, m); !ops)
    out.push_back("op by op: " + plan::why_not_op_level_plan(p, m));
  else if (auto ok = detail::check_op_level(
               m, *ops, static_cast<int>(detail::op_level_devices(*ops).size()));
           !ok)  // (at its own size: a wrong one is said above)
    out.push_back("op by op: " + ok.error().message);
  return out;
}

std::string precision_problem(model::DType precision, bool cuda) {
  switch (precision) {
    case model::DType::fp32:
    case model::DType::tf32:  // fp32 whose CUDA matmuls take the TF32 path
    case model::DType::bf16:
      return "";
    case model::DType::fp16:
      if (!cuda)
        return "precision fp16: runs with --device cuda only (the CPU's autocast has no fp16; "
               "bf16 is its CPU counterpart)";
      return "";
    default:
      return fmt::format("precision {}: expected fp32, tf32, bf16 or fp16",
                         model::to_string(precision));
  }
}

}  // namespace hetplan::runtime
