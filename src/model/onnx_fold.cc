#include "onnx_fold.h"

#include <onnx/defs/schema.h>
#include <onnx/defs/tensor_proto_util.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace hetplan::model::detail {
namespace {

// Values larger than this are left to the runtime graph (masks, position tables).
constexpr std::size_t kMaxElements = 4096;

struct Value {
  std::vector<std::int64_t> shape;
  std::vector<double> v;  // row-major; integers are exact up to 2^53
  int type = onnx::TensorProto::INT64;
};

bool is_integer(int t) {
  return t == onnx::TensorProto::INT64 || t == onnx::TensorProto::INT32 ||
         t == onnx::TensorProto::INT16 || t == onnx::TensorProto::INT8 ||
         t == onnx::TensorProto::UINT8 || t == onnx::TensorProto::UINT16 ||
         t == onnx::TensorProto::UINT32 || t == onnx::TensorProto::UINT64 ||
         t == onnx::TensorProto::BOOL;
}

// Elements of a shape; kMaxElements + 1 for any shape with a negative dimension or a dimension
// over kMaxElements (even beside a zero one), so that nothing derived from it is folded.
std::size_t count(const std::vector<std::int64_t>& shape) {
  std::size_t n = 1;
  for (std::int64_t d : shape) {
    if (d < 0 || d > static_cast<std::int64_t>(kMaxElements)) return kMaxElements + 1;
    n *= static_cast<std::size_t>(d);
    if (n > kMaxElements) return kMaxElements + 1;
  }
  return n;
}

// A double as int64, saturated: values are doubles, in which INT64_MAX (the exporters' "to the
// end" for Slice) rounds up to 2^63, out of int64's range.
std::int64_t to_i64(double x) {
  if (!(x > -9.2e18)) return x != x ? 0 : INT64_MIN;
  if (x >= 9.2e18) return INT64_MAX;
  return static_cast<std::int64_t>(x);
}

std::optional<Value> from_tensor(const onnx::TensorProto& t) {
  Value out;
  out.shape.assign(t.dims().begin(), t.dims().end());
  out.type = t.data_type();
  if (count(out.shape) > kMaxElements) return std::nullopt;
  if (t.data_location() == onnx::TensorProto::EXTERNAL) return std::nullopt;
  try {
    switch (t.data_type()) {
      case onnx::TensorProto::INT64:
        for (auto x : onnx::ParseData<std::int64_t>(&t)) out.v.push_back(static_cast<double>(x));
        break;
      case onnx::TensorProto::INT32:
        for (auto x : onnx::ParseData<std::int32_t>(&t)) out.v.push_back(x);
        break;
      case onnx::TensorProto::FLOAT:
        for (auto x : onnx::ParseData<float>(&t)) out.v.push_back(x);
        break;
      case onnx::TensorProto::DOUBLE:
        for (auto x : onnx::ParseData<double>(&t)) out.v.push_back(x);
        break;
      case onnx::TensorProto::BOOL:
        for (int32_t x : t.int32_data()) out.v.push_back(x != 0);
        for (char c : t.raw_data()) out.v.push_back(c != 0);
        break;
      default:
        return std::nullopt;
    }
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (out.v.size() != count(out.shape)) return std::nullopt;
  return out;
}

onnx::TensorProto to_tensor(const Value& val, const std::string& name) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(val.type);
  for (std::int64_t d : val.shape) t.add_dims(d);
  for (double x : val.v) {
    switch (val.type) {
      case onnx::TensorProto::INT64:
        t.add_int64_data(to_i64(x));
        break;
      case onnx::TensorProto::FLOAT:
        t.add_float_data(static_cast<float>(x));
        break;
      case onnx::TensorProto::DOUBLE:
        t.add_double_data(x);
        break;
      default:  // int32 and bool (Cast folds to no other type) live in int32_data
        t.add_int32_data(
            static_cast<std::int32_t>(std::clamp<std::int64_t>(to_i64(x), INT32_MIN, INT32_MAX)));
        break;
    }
  }
  return t;
}

const onnx::AttributeProto* attr(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

std::int64_t attr_int(const onnx::NodeProto& n, const std::string& name, std::int64_t dflt) {
  const auto* a = attr(n, name);
  return a ? a->i() : dflt;
}

std::vector<std::int64_t> as_ints(const Value& v) {
  std::vector<std::int64_t> out;
  for (double x : v.v) out.push_back(to_i64(x));
  return out;
}

// The multidirectional broadcast of two shapes (numpy's rule); nullopt where they do not fit.
std::optional<std::vector<std::int64_t>> broadcast(const std::vector<std::int64_t>& a,
                                                   const std::vector<std::int64_t>& b) {
  const std::size_t rank = std::max(a.size(), b.size());
  std::vector<std::int64_t> out(rank, 1);
  for (std::size_t i = 0; i < rank; ++i) {
    const std::int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const std::int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// Elementwise, each operand either the result's whole shape or a single element (the shapes the
// exporters' shape arithmetic makes); other broadcasts are not folded.
std::optional<Value> binary(const Value& a, const Value& b, int type,
                            const std::function<std::optional<double>(double, double)>& f) {
  const auto shape = broadcast(a.shape, b.shape);
  if (!shape) return std::nullopt;
  Value out;
  out.type = type;
  out.shape = *shape;
  const std::size_t n = count(out.shape);
  if (n > kMaxElements) return std::nullopt;
  for (const Value* v : {&a, &b})
    if (v->v.size() != 1 && v->shape != out.shape) return std::nullopt;
  for (std::size_t i = 0; i < n; ++i) {
    const auto r = f(a.v[a.v.size() == 1 ? 0 : i], b.v[b.v.size() == 1 ? 0 : i]);
    if (!r) return std::nullopt;
    out.v.push_back(*r);
  }
  return out;
}

double integral(double x, int type) { return is_integer(type) ? std::trunc(x) : x; }

// The axes of Unsqueeze/Squeeze/reductions: the second input from opset 13, else an attribute.
std::optional<std::vector<std::int64_t>> axes_of(const onnx::NodeProto& n,
                                                 const std::vector<const Value*>& in) {
  if (in.size() > 1 && in[1]) return as_ints(*in[1]);
  if (const auto* a = attr(n, "axes"))
    return std::vector<std::int64_t>(a->ints().begin(), a->ints().end());
  return std::nullopt;
}

// Slice along one axis, with any step (ONNX's clamping rules), of a tensor of any rank.
std::optional<Value> slice(const onnx::NodeProto& n, const std::vector<const Value*>& in) {
  const Value& a = *in[0];
  auto arg = [&](std::size_t i) -> const Value* { return i < in.size() ? in[i] : nullptr; };
  std::int64_t start = 0, end = 0, step = 1, axis = 0;
  if (arg(1)) {
    if (!arg(2) || arg(1)->v.size() != 1 || arg(2)->v.size() != 1) return std::nullopt;
    if (arg(3) && arg(3)->v.size() != 1) return std::nullopt;
    if (arg(4) && arg(4)->v.size() != 1) return std::nullopt;
    start = to_i64(arg(1)->v[0]);
    end = to_i64(arg(2)->v[0]);
    if (arg(3)) axis = to_i64(arg(3)->v[0]);
    if (arg(4)) step = to_i64(arg(4)->v[0]);
  } else {
    const auto* s = attr(n, "starts");
    const auto* e = attr(n, "ends");
    const auto* ax = attr(n, "axes");
    if (!s || !e || s->ints_size() != 1 || e->ints_size() != 1) return std::nullopt;
    if (ax && ax->ints_size() != 1) return std::nullopt;
    start = s->ints(0);
    end = e->ints(0);
    if (ax) axis = ax->ints(0);
  }
  const auto rank = static_cast<std::int64_t>(a.shape.size());
  if (axis < 0) axis += rank;
  if (step == 0 || axis < 0 || axis >= rank) return std::nullopt;
  // Kept within +-2^62 so that the arithmetic below cannot overflow.
  constexpr std::int64_t kBound = std::int64_t{1} << 62;
  start = std::clamp(start, -kBound, kBound);
  end = std::clamp(end, -kBound, kBound);
  step = std::clamp(step, -kBound, kBound);
  const std::int64_t size = a.shape[static_cast<std::size_t>(axis)];
  if (start < 0) start += size;
  if (end < 0) end += size;
  if (step > 0) {
    start = std::clamp<std::int64_t>(start, 0, size);
    end = std::clamp<std::int64_t>(end, 0, size);
  } else {
    start = std::clamp<std::int64_t>(start, 0, size - 1);
    end = std::clamp<std::int64_t>(end, -1, size - 1);
  }
  const std::int64_t span = step > 0 ? end - start : start - end;
  const std::int64_t picks = span <= 0 ? 0 : (span + std::abs(step) - 1) / std::abs(step);
  if (picks > static_cast<std::int64_t>(kMaxElements)) return std::nullopt;
  std::vector<std::int64_t> picked;
  for (std::int64_t k = 0; k < picks; ++k) picked.push_back(start + k * step);
  std::int64_t outer = 1, inner = 1;
  for (std::int64_t d = 0; d < axis; ++d) outer *= a.shape[static_cast<std::size_t>(d)];
  for (std::int64_t d = axis + 1; d < rank; ++d) inner *= a.shape[static_cast<std::size_t>(d)];
  Value out;
  out.type = a.type;
  out.shape = a.shape;
  out.shape[static_cast<std::size_t>(axis)] = static_cast<std::int64_t>(picked.size());
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i : picked)
      for (std::int64_t k = 0; k < inner; ++k)
        out.v.push_back(a.v[static_cast<std::size_t>((o * size + i) * inner + k)]);
  return out;
}

// Transpose by `perm` (default: reversed) of a tensor of any rank.
std::optional<Value> transpose(const onnx::NodeProto& n, const Value& a) {
  const std::size_t rank = a.shape.size();
  std::vector<std::int64_t> perm;
  if (const auto* p = attr(n, "perm"))
    perm.assign(p->ints().begin(), p->ints().end());
  else
    for (std::size_t d = rank; d-- > 0;) perm.push_back(static_cast<std::int64_t>(d));
  if (perm.size() != rank) return std::nullopt;
  std::vector<bool> seen(rank, false);  // a permutation: each axis once
  for (std::int64_t p : perm) {
    if (p < 0 || p >= static_cast<std::int64_t>(rank) || seen[static_cast<std::size_t>(p)])
      return std::nullopt;
    seen[static_cast<std::size_t>(p)] = true;
  }
  std::vector<std::int64_t> stride(rank, 1);
  for (std::size_t d = rank; d-- > 1;) stride[d - 1] = stride[d] * a.shape[d];
  Value out;
  out.type = a.type;
  for (std::int64_t p : perm) {
    if (p < 0 || p >= static_cast<std::int64_t>(rank)) return std::nullopt;
    out.shape.push_back(a.shape[static_cast<std::size_t>(p)]);
  }
  std::vector<std::int64_t> index(rank, 0);
  for (std::size_t e = 0; e < a.v.size(); ++e) {
    std::int64_t src = 0;
    for (std::size_t d = 0; d < rank; ++d)
      src += index[d] * stride[static_cast<std::size_t>(perm[d])];
    out.v.push_back(a.v[static_cast<std::size_t>(src)]);
    for (std::size_t d = rank; d-- > 0;) {
      if (++index[d] < out.shape[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

std::optional<Value> evaluate(
    const onnx::NodeProto& n, const std::vector<const Value*>& in,
    const std::unordered_map<std::string, std::vector<std::int64_t>>& shapes) {
  const std::string& op = n.op_type();
  auto arg = [&](std::size_t i) -> const Value* { return i < in.size() ? in[i] : nullptr; };
  if (op == "Shape") {
    auto it = shapes.find(n.input(0));
    if (it == shapes.end()) return std::nullopt;
    const auto& s = it->second;
    const auto rank = static_cast<std::int64_t>(s.size());
    std::int64_t start = attr_int(n, "start", 0), end = attr_int(n, "end", rank);
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    start = std::clamp<std::int64_t>(start, 0, rank);
    end = std::clamp<std::int64_t>(end, start, rank);
    Value out;
    out.shape = {end - start};
    for (std::int64_t i = start; i < end; ++i)
      out.v.push_back(static_cast<double>(s[static_cast<std::size_t>(i)]));
    return out;
  }
  if (op == "Size") {
    auto it = shapes.find(n.input(0));
    if (it == shapes.end()) return std::nullopt;
    double total = 1;
    for (std::int64_t d : it->second) total *= static_cast<double>(d);
    return Value{{}, {total}, onnx::TensorProto::INT64};
  }
  // Every other op needs all its inputs known.
  for (int i = 0; i < n.input_size(); ++i)
    if (!n.input(i).empty() && !arg(static_cast<std::size_t>(i))) return std::nullopt;
  const Value* a = arg(0);
  if (!a) return std::nullopt;
  if (op == "Identity") return *a;
  if (op == "Cast") {
    Value out = *a;
    out.type = static_cast<int>(attr_int(n, "to", a->type));
    // Only to the types to_tensor writes exactly; int32 within its range.
    if (out.type != onnx::TensorProto::INT64 && out.type != onnx::TensorProto::INT32 &&
        out.type != onnx::TensorProto::FLOAT && out.type != onnx::TensorProto::DOUBLE &&
        out.type != onnx::TensorProto::BOOL)
      return std::nullopt;
    if (out.type == onnx::TensorProto::INT32)
      for (double x : out.v)
        if (!(x >= INT32_MIN && x <= INT32_MAX)) return std::nullopt;
    for (double& x : out.v)
      x = out.type == onnx::TensorProto::BOOL ? (x != 0) : integral(x, out.type);
    return out;
  }
  if (op == "Neg" || op == "Abs" || op == "Floor" || op == "Ceil" || op == "Sqrt" || op == "Not") {
    Value out = *a;
    for (double& x : out.v)
      x = op == "Neg"     ? -x
          : op == "Abs"   ? std::abs(x)
          : op == "Floor" ? std::floor(x)
          : op == "Ceil"  ? std::ceil(x)
          : op == "Not"   ? (x == 0)
                          : integral(std::sqrt(x), out.type);
    return out;
  }
  if (op == "Unsqueeze" || op == "Squeeze") {
    Value out = *a;
    const auto axes = axes_of(n, in);
    if (op == "Squeeze") {
      std::vector<std::int64_t> keep;
      const auto rank = static_cast<std::int64_t>(a->shape.size());
      for (std::int64_t d = 0; d < rank; ++d) {
        bool drop = axes ? std::any_of(axes->begin(), axes->end(),
                                       [&](std::int64_t x) { return (x < 0 ? x + rank : x) == d; })
                         : a->shape[static_cast<std::size_t>(d)] == 1;
        if (!drop) keep.push_back(a->shape[static_cast<std::size_t>(d)]);
      }
      out.shape = keep;
      return out;
    }
    if (!axes) return std::nullopt;
    const auto rank = static_cast<std::int64_t>(a->shape.size() + axes->size());
    std::vector<std::int64_t> sorted;
    for (std::int64_t x : *axes) sorted.push_back(x < 0 ? x + rank : x);
    std::sort(sorted.begin(), sorted.end());
    out.shape = a->shape;
    for (std::int64_t x : sorted) {
      if (x < 0 || x > static_cast<std::int64_t>(out.shape.size())) return std::nullopt;
      out.shape.insert(out.shape.begin() + x, 1);
    }
    return out;
  }
  if (op == "Concat") {
    Value out;
    out.type = a->type;
    for (const Value* v : in) {
      if (!v) continue;
      if (v->shape.size() > 1) return std::nullopt;
      out.v.insert(out.v.end(), v->v.begin(), v->v.end());
    }
    out.shape = {static_cast<std::int64_t>(out.v.size())};
    return out;
  }
  if (op == "Gather") {
    const Value* idx = arg(1);
    if (a->shape.size() != 1 || attr_int(n, "axis", 0) != 0) return std::nullopt;
    Value out;
    out.type = a->type;
    out.shape = idx->shape;
    const auto size = static_cast<std::int64_t>(a->v.size());
    for (std::int64_t i : as_ints(*idx)) {
      if (i < 0) i += size;
      if (i < 0 || i >= size) return std::nullopt;
      out.v.push_back(a->v[static_cast<std::size_t>(i)]);
    }
    return out;
  }
  if (op == "Slice") return slice(n, in);
  if (op == "Transpose") return transpose(n, *a);
  if (op == "Range") {
    const double start = a->v.at(0), limit = arg(1)->v.at(0), delta = arg(2)->v.at(0);
    if (delta == 0) return std::nullopt;
    const double steps = std::max(0.0, std::ceil((limit - start) / delta));
    if (steps > kMaxElements) return std::nullopt;
    Value out;
    out.type = a->type;
    for (int i = 0; i < static_cast<int>(steps); ++i) out.v.push_back(start + i * delta);
    out.shape = {static_cast<std::int64_t>(out.v.size())};
    return out;
  }
  if (op == "ConstantOfShape") {
    Value out;
    out.shape = as_ints(*a);
    if (count(out.shape) > kMaxElements) return std::nullopt;
    double fill = 0;
    out.type = onnx::TensorProto::FLOAT;
    if (const auto* v = attr(n, "value")) {
      auto f = from_tensor(v->t());
      if (!f || f->v.empty()) return std::nullopt;
      fill = f->v[0];
      out.type = f->type;
    }
    out.v.assign(count(out.shape), fill);
    return out;
  }
  if (op == "Reshape") {
    if (!arg(1)) return std::nullopt;  // opset 1-4: the shape is an attribute
    Value out = *a;
    std::vector<std::int64_t> shape = as_ints(*arg(1));
    for (std::int64_t d : shape)
      if (d < -1 || d > static_cast<std::int64_t>(kMaxElements)) return std::nullopt;
    std::int64_t known = 1;
    int infer = -1;
    for (std::size_t i = 0; i < shape.size(); ++i) {
      if (shape[i] == 0 && i < a->shape.size()) shape[i] = a->shape[i];
      if (shape[i] == -1)
        infer = static_cast<int>(i);
      else
        known *= shape[i];
    }
    if (infer >= 0 && known > 0)
      shape[static_cast<std::size_t>(infer)] = static_cast<std::int64_t>(a->v.size()) / known;
    if (count(shape) != a->v.size()) return std::nullopt;
    out.shape = shape;
    return out;
  }
  const Value* b = arg(1);
  if (!b) return std::nullopt;
  const int t = a->type;
  if (op == "Add") return binary(*a, *b, t, [&](double x, double y) { return x + y; });
  if (op == "Sub") return binary(*a, *b, t, [&](double x, double y) { return x - y; });
  if (op == "Mul") return binary(*a, *b, t, [&](double x, double y) { return x * y; });
  if (op == "Div")  // not by zero: a float's infinity, an integer's error
    return binary(*a, *b, t, [&](double x, double y) -> std::optional<double> {
      if (y == 0) return std::nullopt;
      return integral(x / y, t);
    });
  if (op == "Mod") {
    // fmod=0 (integers): the remainder takes the divisor's sign, as Python's %.
    const bool c_style = attr_int(n, "fmod", 0) != 0;
    return binary(*a, *b, t, [c_style](double x, double y) -> std::optional<double> {
      if (y == 0) return std::nullopt;
      return c_style ? std::fmod(x, y) : x - std::floor(x / y) * y;
    });
  }
  if (op == "Pow")
    return binary(*a, *b, t, [&](double x, double y) { return integral(std::pow(x, y), t); });
  // Max and Min take any number of inputs: folded with two.
  if (op == "Max" && n.input_size() == 2)
    return binary(*a, *b, t, [](double x, double y) { return std::max(x, y); });
  if (op == "Min" && n.input_size() == 2)
    return binary(*a, *b, t, [](double x, double y) { return std::min(x, y); });
  const int boolean = onnx::TensorProto::BOOL;
  if (op == "Equal") return binary(*a, *b, boolean, [](double x, double y) { return x == y; });
  if (op == "Less") return binary(*a, *b, boolean, [](double x, double y) { return x < y; });
  if (op == "Greater") return binary(*a, *b, boolean, [](double x, double y) { return x > y; });
  if (op == "Where" && arg(2)) {
    const Value& c = *arg(2);
    if (a->shape != b->shape || b->shape != c.shape) return std::nullopt;
    Value out = *b;
    for (std::size_t i = 0; i < out.v.size(); ++i) out.v[i] = a->v[i] != 0 ? b->v[i] : c.v[i];
    return out;
  }
  return std::nullopt;
}

}  // namespace

int fold_shape_arithmetic(onnx::ModelProto& model) {
  auto* g = model.mutable_graph();
  std::unordered_map<std::string, std::vector<std::int64_t>> shapes;
  auto note = [&](const onnx::ValueInfoProto& v) {
    if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) return;
    std::vector<std::int64_t> s;
    for (const auto& d : v.type().tensor_type().shape().dim()) {
      if (!d.has_dim_value()) return;
      s.push_back(d.dim_value());
    }
    shapes[v.name()] = std::move(s);
  };
  for (const auto& v : g->value_info()) note(v);
  for (const auto& v : g->input()) note(v);
  for (const auto& v : g->output()) note(v);
  std::unordered_map<std::string, Value> values;
  for (const auto& t : g->initializer()) {
    shapes[t.name()] = std::vector<std::int64_t>(t.dims().begin(), t.dims().end());
    if (!is_integer(t.data_type())) continue;  // weights stay weights
    if (auto v = from_tensor(t)) values[t.name()] = std::move(*v);
  }
  int folded = 0;
  for (auto& n : *g->mutable_node()) {
    if (n.op_type() == "Constant") {
      if (const auto* a = attr(n, "value"); a && n.output_size() == 1)
        if (auto v = from_tensor(a->t())) values[n.output(0)] = std::move(*v);
      continue;
    }
    if (n.output_size() != 1 || !(n.domain().empty() || n.domain() == "ai.onnx")) continue;
    std::vector<const Value*> in;
    for (const auto& name : n.input()) {
      auto it = values.find(name);
      in.push_back(it == values.end() ? nullptr : &it->second);
    }
    std::optional<Value> v;
    try {
      v = evaluate(n, in, shapes);
    } catch (const std::exception&) {
      v.reset();
    }
    if (!v || v->v.size() != count(v->shape)) continue;
    const std::string out = n.output(0);
    n.clear_input();
    n.clear_attribute();
    n.set_op_type("Constant");
    auto* value = n.add_attribute();
    value->set_name("value");
    value->set_type(onnx::AttributeProto::TENSOR);
    *value->mutable_t() = to_tensor(*v, out);
    values[out] = std::move(*v);
    ++folded;
  }
  return folded;
}

int assume_unknown_op_shapes(onnx::ModelProto& model) {
  auto* g = model.mutable_graph();
  std::unordered_map<std::string, const onnx::ValueInfoProto*> typed;
  auto shaped = [](const onnx::ValueInfoProto& v) {
    return v.type().has_tensor_type() && v.type().tensor_type().has_shape();
  };
  for (const auto& v : g->value_info())
    if (shaped(v)) typed[v.name()] = &v;
  for (const auto& v : g->input())
    if (shaped(v)) typed[v.name()] = &v;
  for (const auto& v : g->output())
    if (shaped(v)) typed[v.name()] = &v;
  std::unordered_map<std::string, int> opsets;
  for (const auto& o : model.opset_import()) opsets[o.domain()] = static_cast<int>(o.version());
  std::vector<onnx::ValueInfoProto> added;
  for (const auto& n : g->node()) {
    const auto version = opsets.find(n.domain() == "ai.onnx" ? "" : n.domain());
    if (onnx::OpSchemaRegistry::Schema(n.op_type(), version == opsets.end() ? 1 : version->second,
                                       n.domain()) != nullptr)
      continue;
    if (n.input_size() == 0 || n.output_size() == 0 || n.output(0).empty()) continue;
    if (typed.count(n.output(0))) continue;
    auto in = typed.find(n.input(0));
    if (in == typed.end()) continue;
    onnx::ValueInfoProto v = *in->second;
    v.set_name(n.output(0));
    added.push_back(v);
  }
  for (auto& v : added) {
    // Graph outputs keep their own entry; the rest become value_info.
    bool output = false;
    for (auto& o : *g->mutable_output())
      if (o.name() == v.name()) {
        *o.mutable_type() = v.type();
        output = true;
      }
    if (!output) *g->add_value_info() = v;
  }
  return static_cast<int>(added.size());
}

}  // namespace hetplan::model::detail
