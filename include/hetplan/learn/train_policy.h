// Training TAG's network AlphaZero-style and HeteroG's decoder by policy gradient, on generated
// cases: small models of the zoo's families (GPTs, BERTs, ResNets, VGGs, Inception) on random
// unlike clusters (device mixes, 1 to 100 Gb/s between machines, switched or irregular links).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hetplan/core/error.h"

namespace hetplan::learn {

// One training case: a model spec, a cluster (YAML text) and a batch.
struct TrainingCase {
  std::string name;  // "resnet:depth=18,width=16,image=64 on 2x(4 T4) 10Gbps"
  std::string model;
  std::string cluster_yaml;
  long long global_batch = 128;
};

// `count` cases drawn with `seed`; the same seed gives the same cases. None is a model or cluster
// of the held-out benchmark (scripts/tag_policy_table.sh): their sizes differ from the zoo's
// presets, and the clusters are random.
std::vector<TrainingCase> training_cases(std::uint64_t seed, int count);

struct TrainOptions {
  std::string out;            // the policy file written
  std::string init;           // a policy file to start from; empty: fresh weights
  int iterations = 30;        // rounds of (search every case of the round, then learn)
  int cases_per_iteration = 8;
  int simulations = 256;      // tree-search simulations per case (over all its steps)
  int decoder_samples = 8;    // sequences drawn per case for the decoder's policy gradient
  int epochs = 4;             // passes over the replay buffer per round
  double time_limit_s = 0;    // stops after the round that passes it (0: none)
  std::uint64_t seed = 1;
  int hidden = 48;
  int rounds = 2;
};

struct TrainReport {
  int iterations = 0;
  int cases = 0;
  int samples = 0;              // policy targets learnt from
  double seconds = 0;
  double policy_loss = 0;       // the last round's mean cross-entropy with the visit counts
  double value_loss = 0;        // the last round's mean squared error of the value
  double mean_search_value = 0; // the last round's mean best value the searches reached
  double mean_decoder_value = 0;// the last round's mean value of the decoder's sequences
};

// Writes options.out (atomically: a temporary file renamed) after every round. Errors: a bad
// option, an unreadable init file, an unwritable output.
Result<TrainReport> train_policy(const TrainOptions& options,
                                 const std::function<void(const std::string&)>& progress);

}  // namespace hetplan::learn
