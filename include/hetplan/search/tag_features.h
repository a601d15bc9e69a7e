// What TAG's network reads of an op-level decision problem (tag.h): a heterogeneous graph of op
// groups and devices, and the state of a decision prefix. Plain numbers, so that the search layer
// builds them without libtorch and the learned guide (the learn layer) only turns them into
// tensors. Every feature is dimensionless (fractions, ratios of times, logarithms of ratios), so
// that one network reads models and clusters of any size and speed.
//
// Nodes: one per op group (G) and one per device (N). Edges, as dense matrices:
//   flow      [G x G]  data flow between two groups, either way: log(1 + bytes / mean edge bytes)
//   link      [N x N]  between two devices: log10 of the path bandwidth over the slowest pair's
//                      (0 on the diagonal and for the slowest pair; larger is faster)
//   candidate [G x N]  the group's compute time on that device, as a fraction of the whole model's
//                      on the cluster's fastest type
// Actions (the decision about one group): a device set and a sync method; the micro-batch counts
// for decision 0.
#pragma once

#include <span>
#include <string>
#include <vector>

namespace hetplan::search {

class TagProblem;

// Per group: compute share (on the fastest type), its log, parameter share, has a weight that
// sufficient factors apply to, op share, position in the decision order, bytes in and out share,
// log10 of its op count / 3.
inline constexpr int kTagGroupFeatures = 8;
// Per device: speed relative to the fastest, memory relative to the largest, CPU share, its node's
// devices as a fraction of all, mean log bandwidth to the others, and (state) the compute placed on
// it so far as a fraction of the whole model's.
inline constexpr int kTagDeviceFeatures = 6;
// Per group (state): decided, decided now, chosen set size as a fraction of the devices, placed on
// one device, all-reduce, parameter server, sufficient factors (a tensor split over several
// devices: none of the last four).
inline constexpr int kTagStateFeatures = 7;
// Per action: set size fraction, one device, all-reduce, parameter server, sufficient factors
// (a tensor split over several devices: none of the four), the set's mean speed relative to the
// fastest, the set's slowest link (log10 ratio as in link).
inline constexpr int kTagActionFeatures = 7;
// Per micro-batch count: log2 of it over 5, samples per device and micro-batch (log2 over 5).
inline constexpr int kTagMicrobatchFeatures = 2;
// Global: log10 of the time to all-reduce the parameters once over the slowest pair's link
// divided by the iteration's compute time at an even share, the same over the fastest pair,
// log10 of the devices, log10 of the groups.
inline constexpr int kTagGlobalFeatures = 4;
// Global (state): the chosen micro-batch count (log2 over 5; 0 before it is chosen), the fraction
// of the groups decided.
inline constexpr int kTagGlobalStateFeatures = 2;

// The part of the graph that does not change with the decisions (row-major matrices).
struct TagGraph {
  int groups = 0, devices = 0, actions = 0, microbatch_options = 0;
  std::vector<float> group_x;       // groups x kTagGroupFeatures
  std::vector<float> device_x;      // devices x (kTagDeviceFeatures - 1): the static columns
  std::vector<float> flow;          // groups x groups
  std::vector<float> link;          // devices x devices
  std::vector<float> candidate;     // groups x devices
  std::vector<float> action_x;      // actions x kTagActionFeatures
  std::vector<float> membership;    // actions x devices: 1 where the action's set holds the device
  std::vector<float> microbatch_x;  // microbatch_options x kTagMicrobatchFeatures
  std::vector<float> global_x;      // kTagGlobalFeatures
};

// The state of a decision prefix: which decision comes next and what was decided.
struct TagState {
  int decision = 0;  // the prefix's length: 0 is the micro-batch count, i >= 1 group_at(i)
  int group = -1;    // the group decided now (-1 for decision 0)
  std::vector<float> group_state;   // groups x kTagStateFeatures
  std::vector<float> device_load;   // devices: the state column of the device features
  std::vector<float> global_state;  // kTagGlobalStateFeatures
  std::vector<float> mask;  // per option of this decision: 1 allowed, 0 not (none: complete)
};

TagGraph tag_graph(const TagProblem& problem);
TagState tag_state(const TagProblem& problem, std::span<const int> prefix);

// Learned guidance for TAG's tree search and HeteroG's decoder (implemented by the learn layer on
// libtorch). Both return one non-negative weight per option of the state's decision (the
// micro-batch counts at decision 0, the problem's actions after), zero where the mask is.
class TagGuide {
 public:
  virtual ~TagGuide() = default;
  // What it is, for progress lines: "trained policy data/policy/tag.pt".
  virtual std::string describe() const = 0;
  // The tree search's prior (AlphaZero's policy head).
  virtual std::vector<double> prior(const TagGraph& graph, const TagState& state) = 0;
  // HeteroG's decoder: the probability of each option when decoding a plan directly.
  virtual std::vector<double> decode(const TagGraph& graph, const TagState& state) = 0;
};

}  // namespace hetplan::search
