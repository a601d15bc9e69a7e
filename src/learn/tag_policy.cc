// A trained TagNet as the search's guide (tag_policy.h).
#include "hetplan/learn/tag_policy.h"

#include <fmt/format.h>

#include <filesystem>

#include "tag_net.h"

namespace hetplan::learn {
namespace {

std::vector<double> softmax(const torch::Tensor& logits) {
  const auto p = torch::softmax(logits, 0).contiguous();
  std::vector<double> out(static_cast<std::size_t>(p.size(0)));
  for (long i = 0; i < p.size(0); ++i) out[static_cast<std::size_t>(i)] = p[i].item<double>();
  return out;
}

class NetGuide : public search::TagGuide {
 public:
  NetGuide(TagNet net, std::string file) : net_(std::move(net)), file_(std::move(file)) {}
  std::string describe() const override { return "trained policy " + file_; }
  std::vector<double> prior(const search::TagGraph& graph, const search::TagState& state) override {
    return softmax(run(graph, state).policy);
  }
  std::vector<double> decode(const search::TagGraph& graph,
                             const search::TagState& state) override {
    return softmax(run(graph, state).decoder);
  }

 private:
  NetOutput run(const search::TagGraph& graph, const search::TagState& state) {
    torch::NoGradGuard no_grad;
    return net_->forward(to_tensors(graph), state);  // tens of microseconds beside the network
  }
  TagNet net_;
  std::string file_;
};

}  // namespace

std::string default_policy_file() {
  return std::string(HETPLAN_SOURCE_DIR) + "/data/policy/tag.pt";
}

Result<std::shared_ptr<search::TagGuide>> load_tag_policy(const std::string& file) {
  if (!std::filesystem::is_regular_file(file))
    return Error{fmt::format("{}: no such policy file", file)};
  torch::set_num_threads(1);
  try {
    return std::shared_ptr<search::TagGuide>(std::make_shared<NetGuide>(load_net(file), file));
  } catch (const std::exception& e) {
    return Error{e.what()};
  }
}

}  // namespace hetplan::learn
