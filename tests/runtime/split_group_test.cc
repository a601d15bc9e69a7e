// Which ops a split group executes: every op of the zoo's models that run op by op, and an op of
// another split (an expert FFN) refused by name.
#include "../../src/runtime/split_group.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "hetplan/model/zoo.h"

namespace hetplan::runtime::detail {
namespace {

TEST(SplitGroup, ExecutesEveryOpOfTheZoosModelsAndRefusesOthersByName) {
  for (const char* spec : {"bert:layers=2,hidden=32,heads=4,seq=16,vocab=64",
                           "gpt:layers=2,hidden=64,heads=4,seq=32,vocab=256",
                           "vit:layers=2,hidden=32,heads=4,image=32,patch=8,classes=10",
                           "resnet:depth=18,width=8,image=32", "vgg:depth=11,image=32",
                           "inception:image=75", "mlp:layers=2,hidden=8,in=4,out=3"}) {
    const auto m = model::load_model(spec);
    ASSERT_TRUE(m) << spec;
    for (const auto& op : m->ops) {
      const auto ok = check_split_op(op);
      EXPECT_TRUE(ok) << spec << ": " << (ok ? "" : ok.error().message);
    }
  }
  const auto m = model::load_model("bert:layers=2,hidden=32,heads=4,seq=16,vocab=64");
  ASSERT_TRUE(m);
  const auto fc1 = std::find_if(m->ops.begin(), m->ops.end(),
                                [](const model::Op& op) { return op.name == "layers.0.mlp.fc1"; });
  ASSERT_NE(fc1, m->ops.end());
  model::Op expert = *fc1;
  expert.shard = model::ShardKind::expert;
  const auto ok = check_split_op(expert);
  ASSERT_FALSE(ok);
  EXPECT_EQ(ok.error().message,
            "op \"layers.0.mlp.fc1\" (matmul split by expert) is not executed in a split group yet "
            "(convolutions by channel, linear layers by column, row or vocabulary, embeddings by "
            "vocabulary, elementwise ops, softmax, attention by heads, losses by class and ops "
            "computed whole are)");
}

}  // namespace
}  // namespace hetplan::runtime::detail
