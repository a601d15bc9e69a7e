#include "search_args.h"

#include <fmt/format.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <thread>

#include "commands.h"
#include "hetplan/model/zoo.h"
#include "hetplan/plan/run_form.h"
#include "hetplan/runtime/runnable.h"
#ifdef HETPLAN_WITH_RUNTIME
#include "hetplan/learn/tag_policy.h"
#endif

namespace hetplan::cli {

int default_threads() {
  // More threads than that hold more simulations in memory at once for little gain.
  constexpr int kMost = 8;
  cpu_set_t set;
  CPU_ZERO(&set);
  const int cpus = sched_getaffinity(0, sizeof(set), &set) == 0
                       ? CPU_COUNT(&set)
                       : static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp(cpus, 1, kMost);
}

void add_problem_options(CLI::App* cmd, SearchArgs& a) {
  cmd->add_option("--model,-m", a.model,
                  "Model: preset name, family spec (gpt:layers=..) or graph .json")
      ->capture_default_str();
  cmd->add_option("--cluster,-c", a.cluster, "Cluster: preset name (dgx-a100:4) or YAML file")
      ->capture_default_str();
  cmd->add_option("--global-batch,-b", a.global_batch, "Samples per iteration")
      ->capture_default_str();
}

void add_search_options(CLI::App* cmd, SearchArgs& a) {
  cmd->add_option("--time-limit", a.time_limit_s,
                  "Seconds; return the best found by then (0: no limit)")
      ->capture_default_str();
  cmd->add_option("--threads", a.threads,
                  "Plans simulated in parallel (default: the CPUs this process may use, at most 8)")
      ->capture_default_str();
  cmd->add_option("--report", a.report_file, "Write an HTML report to FILE")
      ->check(writable_output);
  cmd->add_flag("--json", a.json, "Print one JSON object instead of the summary");
  cmd->add_flag("--verbose,-v", a.verbose, "Show search progress on stderr");
  cmd->add_flag("--one-type-per-stage", a.one_type_per_stage,
                "Pipeline stages of one device group each (the planner otherwise also tries "
                "stages that span device types, batch shares by speed)");
  cmd->add_option(
         "--attention", a.attention,
         "How stage plans compute attention: plain (QK^T, softmax and scores x V op by "
         "op, the scores kept for the backward pass), flash (one fused kernel that keeps "
         "none; FlashAttention-2, PyTorch's scaled_dot_product_attention) or flash1 (the same "
         "at the first FlashAttention's speed: flash-attn 1.x, its Triton port)")
      ->check(CLI::IsMember({"plain", "flash", "flash1"}))
      ->capture_default_str();
  cmd->add_option("--precision", a.precision,
                  "The arithmetic every plan trains in, written into it: bf16 or fp16 mixed "
                  "precision (16-bit GEMMs and activations, fp32 master weights and Adam state) "
                  "or fp32, or tf32 (fp32 whose GEMMs run on the TF32 tensor cores); the model "
                  "is costed in it (default: the model's dtype, bf16 for the zoo, and plans that "
                  "leave it to `hetplan run --precision`). fp16 plans run with --device cuda, "
                  "under dynamic loss scaling")
      ->check(CLI::IsMember({"bf16", "fp16", "fp32", "tf32"}));
  cmd->add_option("--adam", a.adam,
                  "How the engine the plans are for runs the Adam step, written into every plan "
                  "and priced: fused (one multi-tensor kernel: Megatron-LM, DeepSpeed; the "
                  "default), foreach (PyTorch's multi-tensor AdamW) or per-tensor (PyTorch's "
                  "loop over the tensors, foreach=False)")
      ->check(CLI::IsMember({"fused", "foreach", "per-tensor"}));
  cmd->add_option("--loss", a.loss,
                  "How the engine the plans are for computes the loss, written into every plan "
                  "and priced: unfused (the logits cast to fp32, log-softmax and NLL op by op: "
                  "PyTorch, Megatron-LM; the default) or fused (one kernel per pass: flash-attn's "
                  "cross entropy, Megatron-Core's --cross-entropy-loss-fusion)")
      ->check(CLI::IsMember({"unfused", "fused"}));
  cmd->add_option("--metrics", a.metrics,
                  "Losses the engine the plans are for computes again each micro-batch for its "
                  "training metrics, written into every plan and priced (Composer, llm-foundry's "
                  "trainer: 2; default 0)")
      ->check(CLI::Range(0, plan::kMaxMetrics));
  auto* runnable = cmd->add_flag(
      "--runnable", a.runnable,
      "Choose only plans that `hetplan run` executes (the default; the runtime's own check)");
  cmd->add_flag("--any-form", a.any_form,
                "Also choose plans `hetplan run` does not execute yet (some op-level plans, "
                "ZeRO-3 over pipelines, ...; the simulator prices every form)")
      ->excludes(runnable);
}

Result<model::Model> load_search_model(const SearchArgs& a) {
  if (a.precision.empty()) return model::load_model(a.model, "--model");
  const auto dtype = plan::precision_from_string(a.precision);
  if (!dtype)
    return Error{fmt::format("--precision: expected one of {}, got '{}'", plan::precision_names(),
                             a.precision)};
  return model::load_model(a.model, "--model", *dtype);
}

std::string precision_for_cluster(const SearchArgs& a, const cluster::Cluster& c) {
  if (a.precision != "fp16" || a.any_form) return "";
  for (const auto& t : c.device_types)
    if (t.architecture != cluster::Architecture::cpu) return "";
  return fmt::format(
      "--precision fp16: {} has CPUs only, and `hetplan run` trains in fp16 on CUDA only (bf16 is "
      "the CPU's; --any-form plans fp16 for simulate and export)",
      c.name);
}

std::string fill_search_options(const SearchArgs& a, search::SearchOptions& opts) {
  if (a.global_batch < 1 || a.global_batch > plan::kMaxGlobalBatch)
    return fmt::format("--global-batch: expected an integer in 1..{}, got {}",
                       plan::kMaxGlobalBatch, a.global_batch);
  if (a.time_limit_s < 0) return "--time-limit: expected seconds >= 0";
  if (a.threads < 1) return "--threads: expected at least 1";
  opts.global_batch = a.global_batch;
  opts.time_limit_s = a.time_limit_s;
  opts.threads = a.threads;
  opts.mixed_stages = !a.one_type_per_stage;
  opts.attention = *plan::attention_from_string(a.attention);  // CLI11 checked the name
  if (!a.precision.empty()) opts.precision = plan::precision_from_string(a.precision);
  if (!a.adam.empty()) opts.adam = *plan::adam_from_string(a.adam);  // CLI11 checked the name
  if (!a.loss.empty()) opts.loss = *plan::loss_from_string(a.loss);  // likewise
  if (a.metrics >= 0) opts.metrics = a.metrics;                      // CLI11 checked the range
  if (a.verbose || isatty(fileno(stderr)))
    opts.progress = [](const std::string& line) {
      std::fprintf(stderr, "hetplan: %s\n", line.c_str());
    };
  return "";
}

std::string set_runnable(const SearchArgs& a, const model::Model& m, search::SearchOptions& opts) {
  if (a.any_form && !a.resumes) return "";
  // As hetplan run sees a plan: its form, op by op or not.
  auto runs_op_by_op = [&m](const plan::Plan& p) {
    return runtime::executable_form(m, p, static_cast<int>(plan::plan_devices(p).size()))
        .plan.is_op_level();
  };
  std::optional<bool> op_by_op;  // as the run resumed ran
  if (a.resumes) op_by_op = runs_op_by_op(*a.resumes);
  opts.executable = [&m, op_by_op, runs_op_by_op](const plan::Plan& p) -> std::string {
    if (auto why = runtime::why_not_runnable(m, p); !why.empty()) return why;
    if (op_by_op && runs_op_by_op(p) != *op_by_op)
      return *op_by_op ? "it runs as a stage plan, and the run it resumes ran op by op (its "
                         "checkpoints go by the op graph's names)"
                       : "it runs op by op, and the run it resumes ran as a stage plan (its "
                         "checkpoints go by the stage modules' names)";
    return std::string();
  };
  return "";
}

std::string set_policy(const SearchArgs& a, bool required, bool used, search::SearchOptions& opts) {
  if (a.policy == "none" || !used) return "";
#ifdef HETPLAN_WITH_RUNTIME
  const std::string file = a.policy.empty() ? learn::default_policy_file() : a.policy;
  auto guide = learn::load_tag_policy(file);
  if (guide) {
    opts.tag_guide = std::move(*guide);
    return "";
  }
  if (!a.policy.empty()) return "--policy: " + guide.error().message;
  if (required) return "--algo heterog: needs the trained policy: " + guide.error().message;
  if (opts.progress)
    opts.progress("no trained policy (" + guide.error().message +
                  "): TAG searches with a uniform prior, HeteroG does not run");
  return "";
#else
  (void)required;
  const std::string why = exec_runtime_binary();
  if (!a.policy.empty()) return "--policy: " + why + "; libtorch runs the trained policy";
  if (opts.progress)
    opts.progress("no trained policy (" + why +
                  "): TAG searches with a uniform prior, HeteroG does not run");
  return "";
#endif
}

}  // namespace hetplan::cli
