#include "transformer_block.h"

namespace hetplan::model::detail {
namespace {

double d(std::int64_t v) { return static_cast<double>(v); }

// Whether the attention core is one the runtime executes op by op (OpFn::attention_scores): one K
// and V per head, no rotation (causal or not).
bool plain_attention(const BlockShape& b) { return !b.rope && b.kv_heads == b.heads; }

int add_norm(GraphBuilder& g, const std::string& name, const BlockShape& b, int input) {
  return add_saving_norm(g, name, b.norm, b.seq, b.hidden, input);
}

// QKV projection through the attention-output projection; returns the projection's op.
int add_attention(GraphBuilder& g, const std::string& p, const BlockShape& b, int input) {
  const double act = g.act(), s = d(b.seq);
  const std::int64_t q_width = b.heads * b.head_dim, kv_width = b.kv_heads * b.head_dim;
  Op qkv = linear(p + ".qkv", {input}, act, b.seq, b.hidden, q_width + 2 * kv_width, b.bias,
                  ShardKind::column);
  // Q, K, V are kept whole here unless RoPE rotates Q and K, in which case the rotated copies
  // are what the attention core's backward pass reads.
  qkv.saved_bytes = act * s * d(b.rope ? kv_width : q_width + 2 * kv_width);
  qkv.compute = op_compute(OpFn::linear, {b.seq, q_width + 2 * kv_width}, b.bias);
  int qk = g.add(std::move(qkv));
  const int v = qk;
  if (b.rope) {
    const double rotated = s * d(q_width + kv_width);
    Op rope = pointwise(p + ".rope", OpKind::elementwise, ShardKind::heads, {qk}, act, rotated,
                        kRopeFlops);
    rope.saved_bytes = act * rotated;
    qk = g.add(std::move(rope));
  }
  const double scores = d(b.heads) * s * s;
  Op qkt = batched_matmul(p + ".scores", {qk}, act, b.heads, b.seq, b.seq, b.head_dim);
  qkt.attention_core = true;
  if (plain_attention(b)) {
    qkt.compute = op_compute(OpFn::attention_scores, {b.heads, b.seq, b.seq});
    qkt.compute.causal = b.causal;
  }
  const int sc = g.add(std::move(qkt));
  Op softmax = pointwise(p + ".softmax", OpKind::softmax, ShardKind::heads, {sc}, act, scores,
                         kSoftmaxFlops);
  softmax.attention_core = true;
  softmax.saved_bytes = act * scores;
  softmax.compute = op_compute(OpFn::softmax, {b.heads, b.seq, b.seq});
  int probs = g.add(std::move(softmax));
  double probs_saved = 0;  // without dropout, scores x V reads the softmax output kept above
  if (b.dropout) {
    Op drop = dropout(p + ".dropout", ShardKind::heads, {probs}, act, scores);
    drop.attention_core = true;
    drop.compute = op_compute(OpFn::dropout, {b.heads, b.seq, b.seq}, false, b.drop);
    probs = g.add(std::move(drop));
    probs_saved = act * scores;
  }
  Op ctx = batched_matmul(p + ".context", {probs, v}, act, b.heads, b.seq, b.head_dim, b.seq);
  ctx.attention_core = true;
  ctx.saved_bytes = probs_saved;
  if (plain_attention(b)) ctx.compute = op_compute(OpFn::attention_context, {b.seq, q_width});
  const int c = g.add(std::move(ctx));
  Op proj = linear(p + ".proj", {c}, act, b.seq, q_width, b.hidden, b.bias, ShardKind::row);
  proj.saved_bytes = act * s * d(q_width);
  proj.compute = op_compute(OpFn::linear, {b.seq, b.hidden}, b.bias);
  return g.add(std::move(proj));
}

// Dense FFN: fc1-GeLU-fc2 or gate_up-SiLU*up-down; returns the last GEMM's op.
int add_dense_ffn(GraphBuilder& g, const std::string& p, const BlockShape& b, int input) {
  const double act = g.act(), sf = d(b.seq) * d(b.ffn);
  if (b.swiglu) {
    const int up = g.add(linear(p + ".gate_up", {input}, act, b.seq, b.hidden, 2 * b.ffn, b.bias,
                                ShardKind::column));
    Op silu = pointwise(p + ".silu_mul", OpKind::elementwise, ShardKind::heads, {up}, act, sf,
                        kSiluMulFlops, 2);
    silu.saved_bytes = 2 * act * sf;
    const int h = g.add(std::move(silu));
    Op down = linear(p + ".down", {h}, act, b.seq, b.ffn, b.hidden, b.bias, ShardKind::row);
    down.saved_bytes = act * sf;
    return g.add(std::move(down));
  }
  Op up = linear(p + ".fc1", {input}, act, b.seq, b.hidden, b.ffn, b.bias, ShardKind::column);
  up.compute = op_compute(OpFn::linear, {b.seq, b.ffn}, b.bias);
  const int fc1 = g.add(std::move(up));
  Op gelu =
      pointwise(p + ".gelu", OpKind::elementwise, ShardKind::heads, {fc1}, act, sf, kGeluFlops);
  gelu.saved_bytes = act * sf;
  gelu.compute = op_compute(OpFn::gelu, {b.seq, b.ffn});
  const int h = g.add(std::move(gelu));
  Op fc2 = linear(p + ".fc2", {h}, act, b.seq, b.ffn, b.hidden, b.bias, ShardKind::row);
  fc2.saved_bytes = act * sf;
  fc2.compute = op_compute(OpFn::linear, {b.seq, b.hidden}, b.bias);
  return g.add(std::move(fc2));
}

// Top-k mixture of SwiGLU experts (Mixtral); returns the combine op. Per sample, s*k token copies
// go through the experts, about s*k/E per expert.
int add_moe_ffn(GraphBuilder& g, const std::string& p, const BlockShape& b, int input) {
  const double act = g.act(), s = d(b.seq), routed = s * d(b.top_k);
  const std::int64_t per_expert = (b.seq * b.top_k + b.experts - 1) / b.experts;
  Op router =
      linear(p + ".router", {input}, act, b.seq, b.hidden, b.experts, false, ShardKind::replicated);
  router.kind = OpKind::moe_router;
  router.flops += kSoftmaxFlops * s * d(b.experts);  // softmax and top-k over the gate logits
  router.saved_bytes = kFp32Bytes * s * d(b.experts);
  const int r = g.add(std::move(router));

  auto expert_gemm = [&](std::string name, int in, std::int64_t k, std::int64_t n) {
    Op op = linear(std::move(name), {in}, act, 1, k, n, false, ShardKind::expert);
    op.flops = 2.0 * routed * d(k) * d(n);
    op.bytes_read = act * routed * d(k);
    op.bytes_written = act * routed * d(n);
    op.params = b.experts * k * n;
    op.gemm = GemmShape{per_expert, n, k, b.experts};
    return op;
  };
  Op up = expert_gemm(p + ".gate_up", input, b.hidden, 2 * b.ffn);
  up.inputs.push_back(r);
  up.saved_bytes = act * routed * d(b.hidden);  // the dispatched copies of the tokens
  const int u = g.add(std::move(up));
  Op silu = pointwise(p + ".silu_mul", OpKind::elementwise, ShardKind::expert, {u}, act,
                      routed * d(b.ffn), kSiluMulFlops, 2);
  silu.saved_bytes = 2 * act * routed * d(b.ffn);
  const int h = g.add(std::move(silu));
  Op down = expert_gemm(p + ".down", h, b.ffn, b.hidden);
  down.saved_bytes = act * routed * d(b.ffn);
  const int dn = g.add(std::move(down));
  // Weighted sum of each token's k expert outputs; the routing-weight gradient needs them.
  Op combine = pointwise(p + ".combine", OpKind::elementwise, ShardKind::replicated, {dn, r}, act,
                         s * d(b.hidden), 2.0 * d(b.top_k), static_cast<int>(b.top_k));
  combine.saved_bytes = act * routed * d(b.hidden);
  return g.add(std::move(combine));
}

int add_residual(GraphBuilder& g, const std::string& name, const BlockShape& b, int branch,
                 int skip) {
  Op add = pointwise(name, OpKind::elementwise, ShardKind::replicated, {branch, skip}, g.act(),
                     d(b.seq) * d(b.hidden), kAddFlops, 2);
  add.compute = op_compute(OpFn::add, {b.seq, b.hidden});
  return g.add(std::move(add));
}

int add_branch_dropout(GraphBuilder& g, const std::string& name, const BlockShape& b, int input) {
  if (!b.dropout) return input;
  Op drop = dropout(name, ShardKind::replicated, {input}, g.act(), d(b.seq) * d(b.hidden));
  drop.compute = op_compute(OpFn::dropout, {b.seq, b.hidden}, false, b.drop);
  return g.add(std::move(drop));
}

}  // namespace

BlockShape gpt_style_block(std::int64_t seq, std::int64_t hidden, std::int64_t heads,
                           std::int64_t head_dim, std::int64_t ffn) {
  BlockShape b;
  b.seq = seq;
  b.hidden = hidden;
  b.heads = b.kv_heads = heads;
  b.head_dim = head_dim;
  b.ffn = ffn;
  return b;
}

int add_saving_norm(GraphBuilder& g, const std::string& name, OpKind kind, std::int64_t seq,
                    std::int64_t width, int input) {
  Op op = norm(name, kind, {input}, g.act(), seq, width);
  op.saved_bytes = 2 * g.act() * d(seq) * d(width);
  if (kind == OpKind::layernorm) op.compute = op_compute(OpFn::layernorm, {seq, width});
  return g.add(std::move(op));
}

int add_transformer_layers(GraphBuilder& g, const BlockShape& b, std::int64_t layers, int input) {
  for (std::int64_t i = 0; i < layers; ++i) {
    const std::string name = "layers." + std::to_string(i);
    g.begin_layer(name, LayerKind::transformer);
    input = add_transformer_block(g, name, b, input);
  }
  return input;
}

void describe_transformer(Model& m, Family family, const BlockShape& b, std::int64_t layers,
                          std::int64_t vocab) {
  m.family = family;
  m.seq_len = static_cast<int>(b.seq);
  m.vocab = static_cast<int>(vocab);
  m.hidden = static_cast<int>(b.hidden);
  m.heads = static_cast<int>(b.heads);
  m.kv_heads = static_cast<int>(b.kv_heads);
  m.head_dim = static_cast<int>(b.head_dim);
  m.ffn_hidden = static_cast<int>(b.ffn);
  m.num_blocks = static_cast<int>(layers);
  m.experts = static_cast<int>(b.experts);
  m.top_k = static_cast<int>(b.top_k);
}

int add_transformer_block(GraphBuilder& g, const std::string& prefix, const BlockShape& b,
                          int input) {
  const bool moe = b.experts > 0;
  const std::string ffn = prefix + (moe ? ".moe" : ".mlp");
  auto ffn_part = [&](int in) {
    return add_branch_dropout(g, ffn + ".dropout", b,
                              moe ? add_moe_ffn(g, ffn, b, in) : add_dense_ffn(g, ffn, b, in));
  };
  if (b.pre_norm) {
    const int n1 = add_norm(g, prefix + ".norm1", b, input);
    const int a = add_branch_dropout(g, prefix + ".attn.proj_dropout", b,
                                     add_attention(g, prefix + ".attn", b, n1));
    const int r1 = add_residual(g, prefix + ".attn.residual", b, a, input);
    const int n2 = add_norm(g, prefix + ".norm2", b, r1);
    return add_residual(g, ffn + ".residual", b, ffn_part(n2), r1);
  }
  const int a = add_branch_dropout(g, prefix + ".attn.proj_dropout", b,
                                   add_attention(g, prefix + ".attn", b, input));
  const int n1 =
      add_norm(g, prefix + ".norm1", b, add_residual(g, prefix + ".attn.residual", b, a, input));
  const int r2 = add_residual(g, ffn + ".residual", b, ffn_part(n1), n1);
  return add_norm(g, prefix + ".norm2", b, r2);
}

}  // namespace hetplan::model::detail
