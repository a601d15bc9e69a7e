// Internal to the command line: the options `plan` and `pareto` share (what to plan for, how long
// and how wide to search, progress, report and JSON output).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "hetplan/search/problem.h"

namespace hetplan::cli {

// The CPUs this process may run on (its affinity), at most 8: --threads' default.
int default_threads();

struct SearchArgs {
  std::string model = "gpt3-1.3b";
  std::string cluster = "hap-mixed";
  std::int64_t global_batch = 512;
  double time_limit_s = 0;
  int threads = default_threads();
  std::string report_file;
  bool json = false;
  bool verbose = false;
  bool runnable = false;  // --runnable given (the default anyway, unless --any-form)
  bool any_form = false;  // --any-form: also plans the runtime does not execute
  // replan: only plans whose run resumes from this plan's checkpoints (run in the same runtime:
  // stage modules or op by op, whose tensors go by different names). Must outlive the search.
  const plan::Plan* resumes = nullptr;
  std::string policy;       // --policy: TAG's and HeteroG's network: a file, "none", "" (shipped)
  int tag_simulations = 0;  // --simulations
  bool one_type_per_stage = false;  // --one-type-per-stage: no pipeline stage spans device types
  std::string attention = "plain";  // --attention plain|flash|flash1 (SearchOptions::attention)
  std::string precision;  // --precision bf16|fp16|fp32|tf32 (SearchOptions::precision; "": unset)
  std::string adam;       // --adam fused|foreach|per-tensor (SearchOptions::adam; "": fused)
  std::string loss;       // --loss unfused|fused (SearchOptions::loss; "": unfused)
  int metrics = -1;       // --metrics 0..8 (SearchOptions::metrics; -1: not given, 0)
};

// Registers --model, --cluster and --global-batch.
void add_problem_options(CLI::App* cmd, SearchArgs& a);
// Registers --time-limit, --threads, --report, --json, --verbose, --runnable, --any-form,
// --one-type-per-stage, --attention, --precision, --adam, --loss and --metrics.
void add_search_options(CLI::App* cmd, SearchArgs& a);

// The model of --model, built in --precision's dtype when it is given.
Result<model::Model> load_search_model(const SearchArgs& a);

// --precision fp16 on a cluster of CPUs only, which no run trains in fp16 (unless --any-form):
// the message; "" otherwise.
std::string precision_for_cluster(const SearchArgs& a, const cluster::Cluster& c);

// Checks --global-batch, --time-limit and --threads and copies them (and --one-type-per-stage,
// --attention and --precision) into opts, with a progress line printer on stderr when --verbose is
// given or stderr is a terminal. Returns the message of
// the first bad argument, or an empty string.
std::string fill_search_options(const SearchArgs& a, search::SearchOptions& opts);

// Unless --any-form, the planners may choose only plans `hetplan run` executes (as it would run
// them: an op-level plan that is a stage plan in disguise as that stage plan, a plan splitting
// every op by batch as one replica per device) for model `m`, which must outlive the search.
// The check is the runtime's own (runtime/runnable.h), which needs no libtorch: builds with and
// without it choose alike. Returns the message of a bad argument, or "". With `resumes` (replan),
// only runnable plans that run as that plan runs (as a stage plan or op by op), whose run can
// resume from its checkpoints.
std::string set_runnable(const SearchArgs& a, const model::Model& m, search::SearchOptions& opts);

// Loads the trained network TAG's search and HeteroG's decoder read (--policy FILE; "none": TAG
// with a uniform prior and no HeteroG; unset: the shipped weights when they are there, otherwise
// a progress line saying the prior is uniform). `required` (--algo heterog): the shipped weights
// must load too. Nothing is loaded unless `used` (the search runs TAG or HeteroG); without
// libtorch built in, a used policy runs the command in hetplan-runtime (exec_runtime_binary).
// Returns the message of a bad argument, or "".
std::string set_policy(const SearchArgs& a, bool required, bool used, search::SearchOptions& opts);

}  // namespace hetplan::cli
