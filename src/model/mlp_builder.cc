#include <string>

#include "builders.h"
#include "cnn_parts.h"
#include "graph_builder.h"

namespace hetplan::model::detail {

Model build_mlp(const MlpConfig& c) {
  Model m;
  m.family = Family::mlp;
  m.hidden = static_cast<int>(c.hidden);
  m.num_blocks = static_cast<int>(c.layers);
  m.num_classes = static_cast<int>(c.out);
  m.dtype = c.dtype;
  GraphBuilder g(m);
  const double act = g.act();
  int x = -1;
  std::int64_t width = c.in;
  auto inputs = [&] { return x < 0 ? std::vector<int>{} : std::vector<int>{x}; };
  for (std::int64_t i = 0; i < c.layers; ++i) {
    const std::string name = "layers." + std::to_string(i);
    g.begin_layer(name, LayerKind::other);
    Op fc = linear(name + ".fc", inputs(), act, 1, width, c.hidden, true, ShardKind::replicated);
    fc.saved_bytes = act * static_cast<double>(width);
    fc.compute = linear_compute(c.hidden);
    x = g.add(std::move(fc));
    Op relu = pointwise(name + ".relu", OpKind::elementwise, ShardKind::replicated, {x}, act,
                        static_cast<double>(c.hidden), kReluFlops);
    relu.saved_bytes = act * static_cast<double>(c.hidden);
    relu.compute.fn = OpFn::relu;
    relu.compute.shape = {c.hidden};
    x = g.add(std::move(relu));
    width = c.hidden;
  }
  g.begin_layer("head", LayerKind::head);
  Op fc = linear("head.fc", inputs(), act, 1, width, c.out, true, ShardKind::replicated);
  fc.saved_bytes = act * static_cast<double>(width);
  fc.compute = linear_compute(c.out);
  x = g.add(std::move(fc));
  Op loss = cross_entropy("head.loss", ShardKind::replicated, {x}, act, 1, c.out);
  loss.compute.fn = OpFn::cross_entropy;
  loss.compute.shape = {1};
  g.add(std::move(loss));
  return m;
}

}  // namespace hetplan::model::detail
