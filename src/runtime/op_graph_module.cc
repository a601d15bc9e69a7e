#include "op_graph_module.h"

#include <map>
#include <vector>

#include "op_graph.h"

namespace hetplan::runtime::detail {
namespace {

class OpGraphStack : public TrainModule {
 public:
  explicit OpGraphStack(model::Model m) : m_(std::move(m)) {
    graph_ = register_module("graph", std::make_shared<OpGraph>(m_));
    num_layers_ = static_cast<int>(m_.layers.size());
    for (int l = 0; l + 1 < num_layers_; ++l)
      layer_fns_.push_back([this, l](const torch::Tensor& x) { return run_ops(l, x, {}); });
  }

  torch::Tensor forward_layers(int first, int count, const torch::Tensor& x,
                               const torch::Tensor& targets) override {
    torch::Tensor y = x;
    for (int l = first; l < first + count; ++l)
      y = l + 1 < num_layers_ ? run_layer(layer_fns_[static_cast<std::size_t>(l)], y,
                                          recompute_ == cost::Recompute::full)
                              : run_ops(l, y, targets);
    return y;
  }

  std::vector<std::int64_t> activation_shape(int layer, std::int64_t n) const override {
    if (layer == 0) return {n, 3, m_.image_size, m_.image_size};
    const model::Layer& before = m_.layers[static_cast<std::size_t>(layer - 1)];
    return graph_->output_shape(before.first_op + before.num_ops - 1, n);
  }

  std::vector<torch::Tensor> layer_parameters(int first, int count) override {
    std::vector<torch::Tensor> out;
    const int o0 = m_.layers[static_cast<std::size_t>(first)].first_op;
    const model::Layer& last = m_.layers[static_cast<std::size_t>(first + count - 1)];
    for (int o = o0; o < last.first_op + last.num_ops; ++o)
      for (const auto& t : graph_->op_parameters(o)) out.push_back(t);
    return out;
  }

  void set_batch_group(Collectives* group) override { group_ = group; }

  void set_rows(std::uint64_t seed, int step, std::int64_t global_batch,
                std::int64_t first) override {
    if (seed != seed_ || step != step_ || global_batch != global_batch_) masks_.clear();
    seed_ = seed;
    step_ = step;
    global_batch_ = global_batch;
    first_ = first;
  }

 private:
  // Layer l's ops on x (the batch's inputs, or the last output of the layer before): its last
  // op's output.
  torch::Tensor run_ops(int l, const torch::Tensor& x, const torch::Tensor& targets) {
    const model::Layer& layer = m_.layers[static_cast<std::size_t>(l)];
    std::vector<torch::Tensor> out(static_cast<std::size_t>(layer.num_ops));
    for (int k = 0; k < layer.num_ops; ++k) {
      const int o = layer.first_op + k;
      const model::Op& op = m_.ops[static_cast<std::size_t>(o)];
      std::vector<torch::Tensor> in;
      if (op.inputs.empty()) in.push_back(x);
      for (int i : op.inputs)
        in.push_back(i < layer.first_op ? x : out[static_cast<std::size_t>(i - layer.first_op)]);
      torch::Tensor mask;
      if (op.compute.fn == model::OpFn::dropout && global_batch_ > 0) {
        torch::Tensor& whole = masks_[o];  // the step's, drawn once for all its passes
        if (!whole.defined())
          whole = dropout_mask(op, seed_, step_, o, global_batch_).to(x.device());
        mask = whole.slice(0, first_, first_ + x.size(0));
      }
      out[static_cast<std::size_t>(k)] = graph_->apply(o, in, targets, group_, mask);
    }
    return out.back();
  }

  model::Model m_;
  std::shared_ptr<OpGraph> graph_;
  std::vector<LayerFn> layer_fns_;  // every layer but the last (the loss needs the targets)
  Collectives* group_ = nullptr;
  std::uint64_t seed_ = 0;
  int step_ = 0;
  std::int64_t global_batch_ = 0, first_ = 0;  // no rows set: no dropout
  std::map<int, torch::Tensor> masks_;         // per dropout op, the global batch's this step
};

}  // namespace

std::shared_ptr<TrainModule> build_op_graph_module(const model::Model& m) {
  return std::make_shared<OpGraphStack>(m);
}

}  // namespace hetplan::runtime::detail
