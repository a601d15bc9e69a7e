#include "builders.h"
#include "transformer_block.h"

namespace hetplan::model::detail {

// ViT (Dosovitskiy et al. 2021): the class token and position embeddings form one parameterised
// op; the classifier reads the class token only. Every op says what it computes (OpCompute).
Model build_vit(const VitConfig& c) {
  const std::int64_t side = c.image / c.patch, patches = side * side, seq = patches + 1;
  BlockShape b = gpt_style_block(seq, c.hidden, c.heads, c.hidden / c.heads, c.mlp);
  b.causal = false;
  Model m;
  describe_transformer(m, Family::vision_transformer, b, c.layers, 0);
  m.image_size = static_cast<int>(c.image);
  m.num_classes = static_cast<int>(c.classes);
  m.dtype = c.dtype;
  GraphBuilder g(m);
  const double act = g.act(), sh = static_cast<double>(seq) * static_cast<double>(c.hidden);
  const double pixels = static_cast<double>(c.channels * c.image * c.image);

  g.begin_layer("embedding", LayerKind::embedding);
  // A patch-size, patch-stride convolution is a GEMM over the flattened patches.
  Op patch = linear("embedding.patch", {}, act, patches, c.channels * c.patch * c.patch, c.hidden,
                    true, ShardKind::channel);
  patch.kind = OpKind::conv2d;
  patch.bytes_read = act * pixels;
  patch.saved_bytes = act * pixels;
  patch.compute = op_compute(OpFn::conv2d, {c.hidden, side, side}, true);
  patch.compute.kernel_h = patch.compute.kernel_w = c.patch;
  patch.compute.stride = c.patch;
  int x = g.add(std::move(patch));
  Op pos = pointwise("embedding.position", OpKind::embedding, ShardKind::replicated, {x}, act, sh,
                     kAddFlops);
  pos.params = (seq + 1) * c.hidden;  // positions and the class token
  pos.compute = op_compute(OpFn::class_token, {seq, c.hidden});
  x = g.add(std::move(pos));
  Op drop = dropout("embedding.dropout", ShardKind::replicated, {x}, act, sh);
  drop.compute = op_compute(OpFn::dropout, {seq, c.hidden}, false, b.drop);
  x = g.add(std::move(drop));

  x = add_transformer_layers(g, b, c.layers, x);

  g.begin_layer("head", LayerKind::head);
  x = add_saving_norm(g, "head.norm", OpKind::layernorm, seq, c.hidden, x);
  Op classify =
      linear("head.classifier", {x}, act, 1, c.hidden, c.classes, true, ShardKind::replicated);
  classify.compute = op_compute(OpFn::linear, {c.classes}, true);  // of the class token
  x = g.add(std::move(classify));
  Op loss = cross_entropy("head.loss", ShardKind::replicated, {x}, act, 1, c.classes);
  loss.compute = op_compute(OpFn::cross_entropy, {1});
  g.add(std::move(loss));
  return m;
}

}  // namespace hetplan::model::detail
