// The ONNX importer's folding of shape arithmetic, on graphs built here: what it folds, with
// ONNX's semantics, and what it must leave alone.
#include "../../src/model/onnx_fold.h"

#include <gtest/gtest.h>

#include <climits>
#include <cstdint>
#include <string>
#include <vector>

namespace hetplan::model::detail {
namespace {

class Graph {
 public:
  Graph() {
    auto* opset = model_.add_opset_import();
    opset->set_domain("");
    opset->set_version(14);
  }
  // A Constant node of int64 values.
  void constant(const std::string& name, std::vector<std::int64_t> dims,
                const std::vector<std::int64_t>& values) {
    auto* n = node("Constant", {}, name);
    auto* a = n->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    auto* t = a->mutable_t();
    t->set_data_type(onnx::TensorProto::INT64);
    for (auto d : dims) t->add_dims(d);
    for (auto v : values) t->add_int64_data(v);
  }
  onnx::NodeProto* node(const std::string& type, const std::vector<std::string>& inputs,
                        const std::string& output) {
    auto* n = model_.mutable_graph()->add_node();
    n->set_op_type(type);
    for (const auto& i : inputs) n->add_input(i);
    n->add_output(output);
    return n;
  }
  static void ints(onnx::NodeProto* n, const std::string& name, std::vector<std::int64_t> v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (auto x : v) a->add_ints(x);
  }
  int fold() { return fold_shape_arithmetic(model_); }
  // The folded values of `output`'s node; empty with folded false when it was not folded.
  std::vector<std::int64_t> values(const std::string& output, bool* folded = nullptr) const {
    for (const auto& n : model_.graph().node())
      if (n.output(0) == output) {
        if (folded) *folded = n.op_type() == "Constant";
        if (n.op_type() != "Constant") return {};
        const auto& t = n.attribute(0).t();
        if (t.data_type() == onnx::TensorProto::INT64)
          return {t.int64_data().begin(), t.int64_data().end()};
        return {t.int32_data().begin(), t.int32_data().end()};
      }
    return {};
  }

 private:
  onnx::ModelProto model_;
};

TEST(OnnxFold, ConcatKeepsTheToTheEndSentinel) {
  Graph g;
  g.constant("a", {1}, {3});
  g.constant("big", {1}, {INT64_MAX});
  auto* c = g.node("Concat", {"a", "big"}, "ends");
  Graph::ints(c, "axis", {});
  c->mutable_attribute(0)->set_type(onnx::AttributeProto::INT);
  c->mutable_attribute(0)->set_i(0);
  EXPECT_EQ(g.fold(), 1);
  EXPECT_EQ(g.values("ends"), (std::vector<std::int64_t>{3, INT64_MAX}));
}

TEST(OnnxFold, SliceAlongAnyAxisWithAnyStep) {
  Graph g;
  g.constant("x", {2, 3}, {1, 2, 3, 4, 5, 6});
  g.constant("start", {1}, {-1});
  g.constant("end", {1}, {INT64_MIN});
  g.constant("axis", {1}, {1});
  g.constant("step", {1}, {-1});
  g.node("Slice", {"x", "start", "end", "axis", "step"}, "reversed");
  g.constant("s2", {1}, {0});
  g.constant("e2", {1}, {INT64_MAX});
  g.constant("a2", {1}, {0});
  g.constant("st2", {1}, {2});
  g.node("Slice", {"x", "s2", "e2", "a2", "st2"}, "every_other_row");
  EXPECT_EQ(g.fold(), 2);
  EXPECT_EQ(g.values("reversed"), (std::vector<std::int64_t>{3, 2, 1, 6, 5, 4}));
  EXPECT_EQ(g.values("every_other_row"), (std::vector<std::int64_t>{1, 2, 3}));
}

TEST(OnnxFold, TransposeAndPythonStyleMod) {
  Graph g;
  g.constant("x", {2, 3}, {1, 2, 3, 4, 5, 6});
  Graph::ints(g.node("Transpose", {"x"}, "t"), "perm", {1, 0});
  g.constant("n", {2}, {-3, 3});
  g.constant("five", {}, {5});
  g.node("Mod", {"n", "five"}, "mod");
  EXPECT_EQ(g.fold(), 2);
  EXPECT_EQ(g.values("t"), (std::vector<std::int64_t>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(g.values("mod"), (std::vector<std::int64_t>{2, 3}));
}

TEST(OnnxFold, LeavesAloneWhatItCannotFoldExactly) {
  Graph g;
  g.constant("x", {2, 2}, {1, 2, 3, 4});
  Graph::ints(g.node("Transpose", {"x"}, "not_a_permutation"), "perm", {0, 0});
  g.constant("col", {2, 1}, {1, 2});
  g.constant("row", {1, 2}, {10, 20});
  g.node("Add", {"col", "row"}, "outer_broadcast");  // [2,2]: neither operand is whole
  g.constant("zero", {}, {0});
  g.node("Div", {"x", "zero"}, "by_zero");
  g.node("Max", {"x", "x", "x"}, "three_way_max");
  g.node("Reshape", {"x"}, "opset1_reshape");  // its shape is an attribute
  g.constant("huge", {1}, {std::int64_t{1} << 40});
  g.node("ConstantOfShape", {"huge"}, "too_big");
  EXPECT_EQ(g.fold(), 0);
  for (const char* out : {"not_a_permutation", "outer_broadcast", "by_zero", "three_way_max",
                          "opset1_reshape", "too_big"}) {
    bool folded = true;
    g.values(out, &folded);
    EXPECT_FALSE(folded) << out;
  }
}

}  // namespace
}  // namespace hetplan::model::detail
