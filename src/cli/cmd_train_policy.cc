// hetplan train-policy: train TAG's graph neural network (the tree search's prior) and HeteroG's
// decoder on generated cases, and write the policy file plan --policy reads.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "commands.h"
#ifdef HETPLAN_WITH_RUNTIME
#include "hetplan/learn/train_policy.h"
#endif

namespace hetplan::cli {
namespace {

struct TrainArgs {
  std::string out;
  std::string init;
  int iterations = 30;
  int cases = 8;
  int simulations = 256;
  int decoder_samples = 8;
  int epochs = 4;
  double time_limit_s = 0;
  std::uint64_t seed = 1;
  bool list_cases = false;
  bool verbose = false;
};

int run_train(const TrainArgs& a) {
#ifdef HETPLAN_WITH_RUNTIME
  if (a.list_cases) {
    if (a.iterations < 1 || a.cases < 1)
      return report_error("--iterations and --cases: expected at least 1");
    for (const auto& c : learn::training_cases(a.seed, a.iterations * a.cases))
      fmt::print("{}\n", c.name);
    return 0;
  }
  if (a.time_limit_s < 0) return report_error("--time-limit: expected seconds >= 0");
  learn::TrainOptions o;
  o.out = a.out;
  o.init = a.init;
  o.iterations = a.iterations;
  o.cases_per_iteration = a.cases;
  o.simulations = a.simulations;
  o.decoder_samples = a.decoder_samples;
  o.epochs = a.epochs;
  o.time_limit_s = a.time_limit_s;
  o.seed = a.seed;
  const bool show = a.verbose || isatty(fileno(stderr));
  auto r = learn::train_policy(o, [show](const std::string& line) {
    if (show) std::fprintf(stderr, "hetplan: %s\n", line.c_str());
  });
  if (!r) return report_error(r.error().message);
  fmt::print(
      "wrote {} ({} rounds, {} cases, {} policy targets, {:.0f} s; last round: policy loss {:.3f}, "
      "value loss {:.3f}, search value {:.3f}, decoder value {:.3f})\n",
      a.out, r->iterations, r->cases, r->samples, r->seconds, r->policy_loss, r->value_loss,
      r->mean_search_value, r->mean_decoder_value);
  return 0;
#else
  (void)a;
  return report_no_runtime("train-policy");
#endif
}

}  // namespace

Action add_train_policy_command(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  auto* cmd = app.add_subcommand(
      "train-policy",
      "Train TAG's graph neural network (AlphaZero-style, on tree-search visit counts) and "
      "HeteroG's decoder (policy gradient) on generated models and clusters");
  cmd->add_option("--out,-o", args->out, "The policy file to write (plan --policy reads it)")
      ->check(writable_output);
  cmd->add_option("--init", args->init, "A policy file to continue training from");
  cmd->add_option("--iterations", args->iterations, "Rounds of searching cases, then learning")
      ->capture_default_str();
  cmd->add_option("--cases", args->cases, "Cases searched per round")->capture_default_str();
  cmd->add_option("--simulations", args->simulations, "Tree-search simulations per case")
      ->capture_default_str();
  cmd->add_option("--decoder-samples", args->decoder_samples,
                  "Sequences the decoder draws per case for its policy gradient (0: none)")
      ->capture_default_str();
  cmd->add_option("--epochs", args->epochs, "Passes over the replay buffer per round")
      ->capture_default_str();
  cmd->add_option("--time-limit", args->time_limit_s,
                  "Seconds; stop after the round that passes it (0: no limit)")
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "Seed of the cases, the weights and the search noise")
      ->capture_default_str();
  cmd->add_flag("--list-cases", args->list_cases, "Print the training cases and exit");
  cmd->add_flag("--verbose,-v", args->verbose, "Show a progress line per round on stderr");
  return [args] {
    if (!args->list_cases && args->out.empty())
      return report_error("--out: expected the policy file to write");
    return run_train(*args);
  };
}

}  // namespace hetplan::cli
