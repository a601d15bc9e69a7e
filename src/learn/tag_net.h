// TAG's heterogeneous graph neural network (libtorch): op-group nodes and device nodes, data-flow
// edges between groups, link edges between devices, candidate edges between groups and devices
// (search/tag_features.h), read by `rounds` rounds of message passing; then four heads:
//   policy   logits over the options of the state's decision: the tree search's prior (TAG)
//   decoder  the same, a separate head trained by policy gradient (HeteroG's direct decoder)
//   value    the speed-up (log, clamped) of the best plan the search found for the case, trained
//            as AlphaZero's value target; it shapes the shared encoder, and no search reads it yet
// Private to the learn layer: nothing outside it sees libtorch.
#pragma once

#include <torch/torch.h>

#include "hetplan/search/tag_features.h"

namespace hetplan::learn {

// The graph as tensors (built once per problem).
struct GraphTensors {
  torch::Tensor group_x, device_x, flow, link_w, to_devices, to_groups, candidate, action_x,
      membership, microbatch_x, global_x;
};
GraphTensors to_tensors(const search::TagGraph& g);

struct NetOutput {
  torch::Tensor policy;   // [options] logits, masked options at -1e9
  torch::Tensor decoder;  // [options] logits, masked likewise
  torch::Tensor value;    // scalar
};

// The network's shape; stored with its weights.
struct NetShape {
  int hidden = 48;
  int rounds = 2;
};

class TagNetImpl : public torch::nn::Module {
 public:
  explicit TagNetImpl(NetShape shape = {});
  NetOutput forward(const GraphTensors& g, const search::TagState& s);
  const NetShape& shape() const { return shape_; }

 private:
  torch::nn::Sequential head(int in, const std::string& name);
  NetShape shape_;
  torch::nn::Linear group_in{nullptr}, device_in{nullptr}, global_in{nullptr};
  std::vector<torch::nn::Linear> g_self_, g_flow_, g_cross_, d_self_, d_link_, d_cross_;
  torch::nn::Sequential policy_action_{nullptr}, policy_micro_{nullptr}, decoder_action_{nullptr},
      decoder_micro_{nullptr}, value_{nullptr};
};
TORCH_MODULE(TagNet);

// The network's file: its shape, the feature sizes it was built for, and its weights.
// Errors name the file.
void save_net(TagNet& net, const std::string& file);
TagNet load_net(const std::string& file);  // throws std::runtime_error with a clear message

}  // namespace hetplan::learn
