#include <string>

#include "builders.h"
#include "transformer_block.h"

namespace hetplan::model::detail {

// ViT (Dosovitskiy et al. 2021): the class token and position embeddings form one parameterised
// op; the classifier reads the class token only.
Model build_vit(const VitConfig& c) {
  Model m;
  const std::int64_t side = c.image / c.patch, patches = side * side, seq = patches + 1;
  m.family = Family::vision_transformer;
  m.seq_len = static_cast<int>(seq);
  m.hidden = static_cast<int>(c.hidden);
  m.heads = m.kv_heads = static_cast<int>(c.heads);
  m.head_dim = static_cast<int>(c.hidden / c.heads);
  m.ffn_hidden = static_cast<int>(c.mlp);
  m.num_blocks = static_cast<int>(c.layers);
  m.image_size = static_cast<int>(c.image);
  m.num_classes = static_cast<int>(c.classes);
  GraphBuilder g(m);
  const double act = g.act(), sh = static_cast<double>(seq) * static_cast<double>(c.hidden);
  const double pixels = static_cast<double>(c.channels * c.image * c.image);

  g.begin_layer("embedding", LayerKind::embedding);
  // A patch-size, patch-stride convolution is a GEMM over the flattened patches.
  Op patch = linear("embedding.patch", {}, act, patches, c.channels * c.patch * c.patch, c.hidden, true, ShardKind::channel);
  patch.kind = OpKind::conv2d;
  patch.bytes_read = act * pixels;
  patch.saved_bytes = act * pixels;
  int x = g.add(std::move(patch));
  Op pos = pointwise("embedding.position", OpKind::embedding, ShardKind::replicated, {x}, act, sh, kAddFlops);
  pos.params = (seq + 1) * c.hidden;  // positions and the class token
  x = g.add(std::move(pos));
  x = g.add(dropout("embedding.dropout", ShardKind::replicated, {x}, act, sh));

  BlockShape b;
  b.seq = seq;
  b.hidden = c.hidden;
  b.heads = b.kv_heads = c.heads;
  b.head_dim = c.hidden / c.heads;
  b.ffn = c.mlp;
  for (std::int64_t i = 0; i < c.layers; ++i) {
    const std::string name = "layers." + std::to_string(i);
    g.begin_layer(name, LayerKind::transformer);
    x = add_transformer_block(g, name, b, x);
  }

  g.begin_layer("head", LayerKind::head);
  Op n = norm("head.norm", OpKind::layernorm, {x}, act, seq, c.hidden);
  n.saved_bytes = 2 * act * sh;
  x = g.add(std::move(n));
  x = g.add(linear("head.classifier", {x}, act, 1, c.hidden, c.classes, true, ShardKind::replicated));
  g.add(cross_entropy("head.loss", ShardKind::replicated, {x}, act, 1, c.classes));
  return m;
}

}  // namespace hetplan::model::detail
