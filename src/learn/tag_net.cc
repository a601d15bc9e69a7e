// TAG's graph neural network (tag_net.h).
#include "tag_net.h"

#include <fmt/format.h>

#include <stdexcept>

namespace hetplan::learn {
namespace {

using search::kTagActionFeatures;
using search::kTagDeviceFeatures;
using search::kTagGlobalFeatures;
using search::kTagGlobalStateFeatures;
using search::kTagGroupFeatures;
using search::kTagMicrobatchFeatures;
using search::kTagStateFeatures;

torch::Tensor matrix(const std::vector<float>& v, int rows, int cols) {
  if (rows == 0 || cols == 0) return torch::zeros({rows, cols});
  return torch::from_blob(const_cast<float*>(v.data()), {rows, cols}, torch::kFloat32).clone();
}

// Rows scaled to sum to 1 (rows of zeros stay zero).
torch::Tensor row_normalised(const torch::Tensor& w) { return w / w.sum(1, true).clamp_min(1e-9); }

// Masked options get a logit no softmax gives weight to.
torch::Tensor masked(const torch::Tensor& logits, const std::vector<float>& mask) {
  const auto m = torch::from_blob(const_cast<float*>(mask.data()), {static_cast<long>(mask.size())},
                                  torch::kFloat32)
                     .clone();
  return logits.masked_fill(m.eq(0), -1e9);
}

// The file's format stamp: a version and the feature sizes the network reads.
std::vector<long> format_stamp(const NetShape& s) {
  return {1,
          kTagGroupFeatures,
          kTagDeviceFeatures,
          kTagStateFeatures,
          kTagActionFeatures,
          kTagMicrobatchFeatures,
          kTagGlobalFeatures,
          kTagGlobalStateFeatures,
          s.hidden,
          s.rounds};
}

}  // namespace

GraphTensors to_tensors(const search::TagGraph& g) {
  GraphTensors t;
  const int G = g.groups, N = g.devices;
  t.group_x = matrix(g.group_x, G, kTagGroupFeatures);
  t.device_x = matrix(g.device_x, N, kTagDeviceFeatures - 1);
  t.flow = row_normalised(matrix(g.flow, G, G));
  // Every other device sends, faster links louder (the slowest pair still counts).
  auto link = matrix(g.link, N, N) + 0.5;
  link.fill_diagonal_(0.0);
  t.link_w = row_normalised(link);
  t.candidate = matrix(g.candidate, G, N);
  // A group hears most from the devices it runs fastest on; a device from the groups that weigh
  // most on it.
  t.to_devices = row_normalised(1.0 / (t.candidate + 1e-6));
  t.to_groups = row_normalised(t.candidate.t().contiguous());
  t.action_x = matrix(g.action_x, g.actions, kTagActionFeatures);
  t.membership = row_normalised(matrix(g.membership, g.actions, N));
  t.microbatch_x = matrix(g.microbatch_x, g.microbatch_options, kTagMicrobatchFeatures);
  t.global_x = matrix(g.global_x, 1, kTagGlobalFeatures);
  return t;
}

torch::nn::Sequential TagNetImpl::head(int in, const std::string& name) {
  const int H = shape_.hidden;
  return register_module(name, torch::nn::Sequential(torch::nn::Linear(in, H), torch::nn::ReLU(),
                                                     torch::nn::Linear(H, 1)));
}

TagNetImpl::TagNetImpl(NetShape shape) : shape_(shape) {
  const int H = shape_.hidden;
  group_in =
      register_module("group_in", torch::nn::Linear(kTagGroupFeatures + kTagStateFeatures, H));
  device_in = register_module("device_in", torch::nn::Linear(kTagDeviceFeatures, H));
  global_in = register_module("global_in",
                              torch::nn::Linear(kTagGlobalFeatures + kTagGlobalStateFeatures, H));
  for (int r = 0; r < shape_.rounds; ++r) {
    auto lin = [&](const char* what) {
      return register_module(fmt::format("{}{}", what, r), torch::nn::Linear(H, H));
    };
    g_self_.push_back(lin("g_self"));
    g_flow_.push_back(lin("g_flow"));
    g_cross_.push_back(lin("g_cross"));
    d_self_.push_back(lin("d_self"));
    d_link_.push_back(lin("d_link"));
    d_cross_.push_back(lin("d_cross"));
  }
  // Action heads read the group decided now, its candidate set's devices, the action's features,
  // the group's estimated time on the set, and the pooled graph (3H).
  const int action_in = 5 * H + kTagActionFeatures + 1;
  const int micro_in = 3 * H + kTagMicrobatchFeatures;
  policy_action_ = head(action_in, "policy_action");
  policy_micro_ = head(micro_in, "policy_micro");
  decoder_action_ = head(action_in, "decoder_action");
  decoder_micro_ = head(micro_in, "decoder_micro");
  value_ = head(3 * H, "value");
}

NetOutput TagNetImpl::forward(const GraphTensors& g, const search::TagState& s) {
  const long G = g.group_x.size(0), N = g.device_x.size(0);
  auto gs = matrix(s.group_state, static_cast<int>(G), kTagStateFeatures);
  auto load = matrix(s.device_load, static_cast<int>(N), 1);
  auto h = torch::relu(group_in->forward(torch::cat({g.group_x, gs}, 1)));
  auto d = torch::relu(device_in->forward(torch::cat({g.device_x, load}, 1)));
  for (int r = 0; r < shape_.rounds; ++r) {
    auto h_next = torch::relu(g_self_[r]->forward(h) + g_flow_[r]->forward(g.flow.mm(h)) +
                              g_cross_[r]->forward(g.to_devices.mm(d))) +
                  h;
    auto d_next = torch::relu(d_self_[r]->forward(d) + d_link_[r]->forward(g.link_w.mm(d)) +
                              d_cross_[r]->forward(g.to_groups.mm(h))) +
                  d;
    h = h_next;
    d = d_next;
  }
  auto glob_state = matrix(s.global_state, 1, kTagGlobalStateFeatures);
  auto z = torch::cat({h.mean(0, true), d.mean(0, true),
                       torch::relu(global_in->forward(torch::cat({g.global_x, glob_state}, 1)))},
                      1);  // [1, 3H]
  NetOutput out;
  out.value = value_->forward(z).squeeze();
  if (s.decision == 0) {
    const long M = g.microbatch_x.size(0);
    auto in = torch::cat({z.expand({M, z.size(1)}), g.microbatch_x}, 1);
    out.policy = masked(policy_micro_->forward(in).squeeze(1), s.mask);
    out.decoder = masked(decoder_micro_->forward(in).squeeze(1), s.mask);
    return out;
  }
  const long A = g.action_x.size(0);
  auto cur = h.index({s.group}).unsqueeze(0).expand({A, h.size(1)});
  auto sets = g.membership.mm(d);  // [A, H]: the mean of each set's devices
  // The group's time on each set with shares proportional to speed: 1 / sum(1 / t_d), as a
  // fraction of the model's time on the fastest type (log10).
  auto rate = (1.0 / (g.candidate.index({s.group}) + 1e-9)).unsqueeze(1);  // [N, 1]
  auto members = (g.membership > 0).to(torch::kFloat32);
  auto set_time = torch::log10(1.0 / members.mm(rate).clamp_min(1e-9));  // [A, 1]
  auto in = torch::cat({cur, sets, g.action_x, set_time, z.expand({A, z.size(1)})}, 1);
  out.policy = masked(policy_action_->forward(in).squeeze(1), s.mask);
  out.decoder = masked(decoder_action_->forward(in).squeeze(1), s.mask);
  return out;
}

void save_net(TagNet& net, const std::string& file) {
  torch::serialize::OutputArchive archive;
  net->save(archive);
  const auto stamp = format_stamp(net->shape());
  archive.write("format", torch::tensor(stamp, torch::kLong));
  archive.save_to(file);
}

TagNet load_net(const std::string& file) {
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(file);
  } catch (const std::exception&) {
    throw std::runtime_error(
        fmt::format("{}: not a policy file that `hetplan train-policy` writes", file));
  }
  torch::Tensor stamp;
  if (!archive.try_read("format", stamp) || stamp.dim() != 1 || stamp.size(0) != 10)
    throw std::runtime_error(fmt::format("{}: format: expected a hetplan policy stamp", file));
  NetShape shape;
  shape.hidden = static_cast<int>(stamp[8].item<long>());
  shape.rounds = static_cast<int>(stamp[9].item<long>());
  if (shape.hidden < 1 || shape.hidden > 1024 || shape.rounds < 0 || shape.rounds > 16)
    throw std::runtime_error(fmt::format("{}: format: hidden or rounds out of range", file));
  const auto expected = format_stamp(shape);
  for (std::size_t i = 0; i < expected.size(); ++i)
    if (stamp[static_cast<long>(i)].item<long>() != expected[i])
      throw std::runtime_error(fmt::format(
          "{}: format: written for other features (entry {} is {}, this build reads {}); "
          "retrain with `hetplan train-policy`",
          file, i, stamp[static_cast<long>(i)].item<long>(), expected[i]));
  TagNet net(shape);
  try {
    net->load(archive);
  } catch (const std::exception&) {
    throw std::runtime_error(fmt::format("{}: weights do not match the network's shape", file));
  }
  net->eval();
  return net;
}

}  // namespace hetplan::learn
