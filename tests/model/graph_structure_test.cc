// Structural invariants of every built-in graph, and the shape of one transformer block.
#include <gtest/gtest.h>

#include <set>

#include "hetplan/model/zoo.h"
#include "load_for_test.h"

namespace hetplan::model {
namespace {

Model load(const std::string& spec) { return testing::load_or_fail(spec); }

TEST(GraphStructure, EveryPresetIsATopologicallyOrderedLayeredGraph) {
  for (const PresetInfo& p : presets()) {
    const Model m = load(p.name);
    ASSERT_FALSE(m.ops.empty()) << p.name;
    std::set<std::string> names;
    int next = 0;
    for (std::size_t li = 0; li < m.layers.size(); ++li) {
      const Layer& l = m.layers[li];
      EXPECT_EQ(l.first_op, next) << p.name << " " << l.name;
      EXPECT_GT(l.num_ops, 0) << p.name << " " << l.name;
      for (int i = l.first_op; i < l.first_op + l.num_ops; ++i)
        EXPECT_EQ(m.ops[static_cast<std::size_t>(i)].layer, static_cast<int>(li));
      next += l.num_ops;
    }
    EXPECT_EQ(next, static_cast<int>(m.ops.size())) << p.name;
    for (std::size_t i = 0; i < m.ops.size(); ++i) {
      const Op& op = m.ops[i];
      EXPECT_TRUE(names.insert(op.name).second) << p.name << ": duplicate " << op.name;
      for (int in : op.inputs) EXPECT_LT(in, static_cast<int>(i)) << op.name;
      if (i > 0) {
        EXPECT_FALSE(op.inputs.empty()) << p.name << ": " << op.name << " has no input";
      }
      EXPECT_GE(op.flops, 0);
      EXPECT_GE(op.saved_bytes, 0);
      if (op.kind == OpKind::matmul || op.kind == OpKind::batched_matmul ||
          op.kind == OpKind::conv2d) {
        const double gemm = 2.0 * static_cast<double>(op.gemm.m * op.gemm.n) *
                            static_cast<double>(op.gemm.k * op.gemm.batch_count);
        EXPECT_GE(op.flops, 0.99 * gemm) << op.name;  // expert GEMMs round tokens per expert up
      }
    }
    EXPECT_EQ(m.layers.back().name, "head") << p.name;
  }
}

TEST(GraphStructure, TransformerPresetsHaveEmbeddingBlocksHead) {
  for (const char* name :
       {"gpt3-125m", "llama3-8b", "bert-base", "vit-b16", "mixtral-8x7b", "opt-350m"}) {
    const Model m = load(name);
    ASSERT_EQ(m.layers.size(), static_cast<std::size_t>(m.num_blocks) + 2) << name;
    EXPECT_EQ(m.layers.front().name, "embedding");
    EXPECT_EQ(m.layers.front().kind, LayerKind::embedding);
    for (int b = 0; b < m.num_blocks; ++b) {
      EXPECT_EQ(m.layers[static_cast<std::size_t>(b) + 1].name, "layers." + std::to_string(b));
      EXPECT_EQ(m.layers[static_cast<std::size_t>(b) + 1].kind, LayerKind::transformer);
    }
    EXPECT_EQ(m.layers.back().kind, LayerKind::head);
  }
}

const Op& find(const Model& m, const std::string& name) {
  for (const Op& op : m.ops)
    if (op.name == name) return op;
  ADD_FAILURE() << "no op " << name;
  static const Op none;
  return none;
}

int index_of(const Model& m, const std::string& name) {
  return static_cast<int>(&find(m, name) - m.ops.data());
}

TEST(GraphStructure, GptBlockShardsAndResiduals) {
  const Model m = load("gpt:layers=2,hidden=16,heads=4,seq=8,vocab=32");
  EXPECT_EQ(find(m, "layers.1.attn.qkv").shard, ShardKind::column);
  EXPECT_EQ(find(m, "layers.1.attn.proj").shard, ShardKind::row);
  EXPECT_EQ(find(m, "layers.1.mlp.fc1").shard, ShardKind::column);
  EXPECT_EQ(find(m, "layers.1.mlp.fc2").shard, ShardKind::row);
  EXPECT_EQ(find(m, "layers.1.attn.softmax").shard, ShardKind::heads);
  EXPECT_EQ(find(m, "layers.1.norm1").shard, ShardKind::replicated);
  EXPECT_EQ(find(m, "embedding.word").shard, ShardKind::vocab);
  EXPECT_EQ(find(m, "head.lm_head").shard, ShardKind::vocab);
  for (const char* core : {"scores", "softmax", "dropout", "context"})
    EXPECT_TRUE(find(m, std::string("layers.1.attn.") + core).attention_core) << core;
  EXPECT_FALSE(find(m, "layers.1.attn.qkv").attention_core);
  // Residuals: the attention branch adds the block input; the MLP branch adds that sum.
  const int block_in = index_of(m, "layers.0.mlp.residual");
  EXPECT_EQ(find(m, "layers.1.attn.residual").inputs,
            (std::vector<int>{index_of(m, "layers.1.attn.proj_dropout"), block_in}));
  EXPECT_EQ(find(m, "layers.1.mlp.residual").inputs,
            (std::vector<int>{index_of(m, "layers.1.mlp.dropout"),
                              index_of(m, "layers.1.attn.residual")}));
  EXPECT_EQ(
      find(m, "layers.1.attn.context").inputs,
      (std::vector<int>{index_of(m, "layers.1.attn.dropout"), index_of(m, "layers.1.attn.qkv")}));
  const Op& qkt = find(m, "layers.1.attn.scores");
  EXPECT_EQ(qkt.gemm, (GemmShape{8, 8, 4, 4}));
  EXPECT_EQ(find(m, "layers.1.attn.qkv").gemm, (GemmShape{8, 48, 16, 1}));
}

TEST(GraphStructure, TiedAndUntiedHeads) {
  const Model gpt = load("gpt3-125m");
  EXPECT_EQ(find(gpt, "head.lm_head").params, 0);
  EXPECT_EQ(find(gpt, "head.lm_head").tied_params, 50257 * 768);
  // The table the tied head reads is the word embedding's.
  ASSERT_GE(gpt.tied_owner(), 0);
  EXPECT_EQ(gpt.ops[static_cast<std::size_t>(gpt.tied_owner())].name, "embedding.word");
  EXPECT_EQ(load("mlp:layers=2,hidden=64,in=32,out=10").tied_owner(), -1);
  // And the head that reads it, in the last layer; the embedding's is the first.
  ASSERT_GE(gpt.tied_reader(), 0);
  EXPECT_EQ(gpt.ops[static_cast<std::size_t>(gpt.tied_reader())].name, "head.lm_head");
  EXPECT_EQ(gpt.layer_of(gpt.tied_reader()), static_cast<int>(gpt.layers.size()) - 1);
  EXPECT_EQ(gpt.layer_of(gpt.tied_owner()), 0);
  EXPECT_EQ(gpt.layer_of(index_of(gpt, "layers.3.attn.qkv")), 4);  // layers.3 follows embedding
  EXPECT_EQ(gpt.layer_of(static_cast<int>(gpt.ops.size())), -1);
  const Model llama = load("llama3-8b");
  EXPECT_EQ(llama.tied_reader(), -1);
  EXPECT_EQ(find(llama, "head.lm_head").params, 128256LL * 4096);
  EXPECT_EQ(find(llama, "head.lm_head").tied_params, 0);
  EXPECT_EQ(llama.kv_heads, 8);
  EXPECT_EQ(find(llama, "layers.0.attn.qkv").gemm, (GemmShape{8192, 4096 + 2 * 1024, 4096, 1}));
}

TEST(GraphStructure, ResnetBlocksAndResiduals) {
  const Model m = load("resnet50");
  EXPECT_EQ(m.layers.size(), 18u);  // stem, 16 bottlenecks, head
  EXPECT_EQ(m.layers[1].name, "layer1.0");
  const Op& add = find(m, "layer1.1.residual");
  EXPECT_EQ(add.inputs,
            (std::vector<int>{index_of(m, "layer1.1.3.bn"), index_of(m, "layer1.0.relu")}));
  EXPECT_EQ(find(m, "layer2.0.2.conv").gemm, (GemmShape{28 * 28, 128, 128 * 9, 1}));
}

}  // namespace
}  // namespace hetplan::model
