#include "hetplan/model/graph_json.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <climits>
#include <unordered_map>

#include "hetplan/core/graph.h"
#include "hetplan/core/json_util.h"
#include "hetplan/core/nearest_name.h"

namespace hetplan::model {
namespace {

constexpr int kVersion = 1;
// Per op and for the whole model, so that Model::parameters() cannot overflow.
constexpr long long kMaxParams = 1'000'000'000'000'000LL;
// Ops in one graph: a thousand layers of a hundred ops each (the zoo's largest has about 2,000).
constexpr std::size_t kMaxOps = 100'000;

// Model fields that are plain integers, in the order they are written.
struct IntField {
  const char* key;
  int Model::*field;
};
constexpr IntField kIntFields[] = {
    {"seq_len", &Model::seq_len},       {"vocab", &Model::vocab},
    {"hidden", &Model::hidden},         {"heads", &Model::heads},
    {"kv_heads", &Model::kv_heads},     {"head_dim", &Model::head_dim},
    {"ffn_hidden", &Model::ffn_hidden}, {"num_blocks", &Model::num_blocks},
    {"experts", &Model::experts},       {"top_k", &Model::top_k},
    {"image_size", &Model::image_size}, {"num_classes", &Model::num_classes},
};

struct DoubleField {
  const char* key;
  double Op::*field;
};
constexpr DoubleField kOpCosts[] = {
    {"flops", &Op::flops},
    {"bytes_read", &Op::bytes_read},
    {"bytes_written", &Op::bytes_written},
    {"saved_bytes", &Op::saved_bytes},
    {"output_bytes", &Op::output_bytes},
};

const std::vector<std::string> kOpKeys = {
    "name",   "kind",        "shard",         "layer",          "inputs",
    "flops",  "bytes_read",  "bytes_written", "saved_bytes",    "output_bytes",
    "params", "tied_params", "gemm",          "attention_core", "compute"};

const std::vector<std::string> kComputeKeys = {"fn",    "shape", "kernel_h", "kernel_w", "stride",
                                               "pad_h", "pad_w", "bias",     "drop",     "causal"};

Json op_to_json(const Op& op) {
  Json j;
  j["name"] = op.name;
  j["kind"] = to_string(op.kind);
  j["shard"] = to_string(op.shard);
  j["inputs"] = op.inputs;
  for (const DoubleField& f : kOpCosts) j[f.key] = op.*f.field;
  j["params"] = op.params;
  if (op.tied_params != 0) j["tied_params"] = op.tied_params;
  if (op.gemm != GemmShape{})
    j["gemm"] = Json{
        {"m", op.gemm.m}, {"n", op.gemm.n}, {"k", op.gemm.k}, {"batch_count", op.gemm.batch_count}};
  if (op.attention_core) j["attention_core"] = true;
  if (op.compute != OpCompute{}) {
    const OpCompute& c = op.compute;
    Json k{{"fn", to_string(c.fn)}, {"shape", c.shape}};
    if (c.fn == OpFn::conv2d || c.fn == OpFn::max_pool || c.fn == OpFn::avg_pool) {
      k["kernel_h"] = c.kernel_h;
      k["kernel_w"] = c.kernel_w;
      k["stride"] = c.stride;
      k["pad_h"] = c.pad_h;
      k["pad_w"] = c.pad_w;
    }
    if (c.bias) k["bias"] = true;
    if (c.drop != 0) k["drop"] = c.drop;
    if (c.causal) k["causal"] = true;
    j["compute"] = std::move(k);
  }
  return j;
}

template <class E>
E read_enum(const Json& obj, std::string_view key, const std::string& path,
            std::optional<E> (*parse)(std::string_view), const std::vector<std::string>& names,
            std::optional<E> dflt = std::nullopt) {
  if (dflt && (!obj.contains(key))) return *dflt;
  const std::string s = json_string(obj, key, path);
  if (auto v = parse(s)) return *v;
  throw InputError(field_path(path, key),
                   fmt::format("'{}' is not one of {}", s, fmt::join(names, ", ")));
}

template <class E, std::size_t N>
std::vector<std::string> names_of(const E (&values)[N]) {
  std::vector<std::string> v;
  for (E e : values) v.emplace_back(to_string(e));
  return v;
}

const std::vector<std::string>& op_kind_names() {
  static const auto v =
      names_of({OpKind::matmul, OpKind::batched_matmul, OpKind::softmax, OpKind::layernorm,
                OpKind::rmsnorm, OpKind::elementwise, OpKind::embedding, OpKind::conv2d,
                OpKind::pool, OpKind::batchnorm, OpKind::cross_entropy, OpKind::moe_router});
  return v;
}
const std::vector<std::string>& shard_names() {
  static const auto v =
      names_of({ShardKind::replicated, ShardKind::column, ShardKind::row, ShardKind::heads,
                ShardKind::vocab, ShardKind::expert, ShardKind::channel});
  return v;
}
const std::vector<std::string>& layer_kind_names() {
  static const auto v = names_of({LayerKind::embedding, LayerKind::transformer, LayerKind::head,
                                  LayerKind::conv_block, LayerKind::other});
  return v;
}
const std::vector<std::string>& family_names() {
  static const auto v = names_of({Family::decoder_lm, Family::encoder, Family::vision_transformer,
                                  Family::moe_lm, Family::cnn, Family::mlp});
  return v;
}
const std::vector<std::string>& dtype_names() {
  static const auto v = names_of(
      {DType::fp32, DType::fp16, DType::bf16, DType::fp8, DType::int32, DType::int64, DType::tf32});
  return v;
}

std::int64_t non_negative_int(const Json& obj, std::string_view key, const std::string& path,
                              long long hi = LLONG_MAX) {
  const long long v = json_int_or(obj, key, path, 0);
  if (v < 0 || v > hi)
    throw InputError(field_path(path, key), fmt::format("expected an integer from 0 to {}", hi));
  return v;
}

const Json& require_array(const Json& obj, std::string_view key, const std::string& path) {
  const Json& v = json_require(obj, key, path);
  if (!v.is_array()) throw InputError(field_path(path, key), "expected an array");
  return v;
}

const std::vector<std::string> kLayerKeys = {"name", "kind", "first_op", "num_ops"};

// An op's "compute" object: what it computes (OpCompute).
OpCompute read_compute(const Json& j, const std::string& path) {
  if (!j.is_object()) throw InputError(path, "expected an object with fn and shape");
  json_refuse_unknown_keys(j, path, kComputeKeys);
  OpCompute c;
  std::vector<std::string> fns;
  for (int f = 0; f <= static_cast<int>(kLastOpFn); ++f)
    fns.emplace_back(to_string(static_cast<OpFn>(f)));
  c.fn = read_enum<OpFn>(j, "fn", path, parse_op_fn, fns);
  const Json& shape = require_array(j, "shape", path);
  if (shape.empty() || shape.size() > 3)
    throw InputError(field_path(path, "shape"), "expected 1 to 3 sizes (the output per sample)");
  for (std::size_t k = 0; k < shape.size(); ++k) {
    if (!shape[k].is_number_integer() || shape[k].get<long long>() < 1 ||
        shape[k].get<long long>() > (1LL << 31))
      throw InputError(index_path(field_path(path, "shape"), k),
                       "expected an integer from 1 to 2^31");
    c.shape.push_back(shape[k].get<std::int64_t>());
  }
  auto positive = [&](const char* key, std::int64_t dflt) {
    const long long v = json_int_or(j, key, path, dflt);
    if (v < 1 || v > 1024)
      throw InputError(field_path(path, key), "expected an integer from 1 to 1024");
    return static_cast<std::int64_t>(v);
  };
  c.kernel_h = positive("kernel_h", 1);
  c.kernel_w = positive("kernel_w", 1);
  c.stride = positive("stride", 1);
  c.pad_h = non_negative_int(j, "pad_h", path, 1024);
  c.pad_w = non_negative_int(j, "pad_w", path, 1024);
  c.bias = json_bool_or(j, "bias", path, false);
  c.drop = json_number_or(j, "drop", path, 0);
  c.causal = json_bool_or(j, "causal", path, false);
  if (!(c.drop >= 0 && c.drop < 1))
    throw InputError(field_path(path, "drop"), "expected a probability from 0 to below 1");
  return c;
}

Op read_op(const Json& j, const std::string& path, int count) {
  if (!j.is_object()) throw InputError(path, "expected an object");
  json_refuse_unknown_keys(j, path, kOpKeys);
  Op op;
  op.name = json_string(j, "name", path);
  if (op.name.empty()) throw InputError(field_path(path, "name"), "expected a non-empty string");
  op.kind = read_enum<OpKind>(j, "kind", path, parse_op_kind, op_kind_names());
  op.shard = read_enum<ShardKind>(j, "shard", path, parse_shard_kind, shard_names(),
                                  ShardKind::replicated);
  if (j.contains("inputs")) {
    const Json& in = require_array(j, "inputs", path);
    const std::string ipath = field_path(path, "inputs");
    for (std::size_t k = 0; k < in.size(); ++k) {
      if (!in[k].is_number_integer() || in[k].get<long long>() < 0 ||
          in[k].get<long long>() >= count)
        throw InputError(index_path(ipath, k), fmt::format("expected an op index below {}", count));
      op.inputs.push_back(in[k].get<int>());
    }
  }
  for (const DoubleField& f : kOpCosts) {
    op.*f.field = json_number_or(j, f.key, path, 0);
    if (op.*f.field < 0) throw InputError(field_path(path, f.key), "expected a number >= 0");
  }
  op.params = non_negative_int(j, "params", path, kMaxParams);
  op.tied_params = non_negative_int(j, "tied_params", path, kMaxParams);
  if (j.contains("gemm")) {
    const Json& g = json_require(j, "gemm", path);
    const std::string gpath = field_path(path, "gemm");
    if (!g.is_object()) throw InputError(gpath, "expected an object with m, n, k, batch_count");
    op.gemm = GemmShape{non_negative_int(g, "m", gpath), non_negative_int(g, "n", gpath),
                        non_negative_int(g, "k", gpath), non_negative_int(g, "batch_count", gpath)};
  }
  op.attention_core = json_bool_or(j, "attention_core", path, false);
  if (j.contains("compute")) op.compute = read_compute(j["compute"], field_path(path, "compute"));
  return op;
}

// Layers must cover the ops in order, each op in exactly one layer.
std::vector<Layer> read_layers(const Json& doc, std::vector<Op>& ops) {
  const Json& arr = require_array(doc, "layers", "");
  if (arr.empty()) throw InputError("layers", "expected at least one layer");
  std::vector<Layer> layers;
  int next = 0;
  const int n = static_cast<int>(ops.size());
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const std::string path = index_path("layers", i);
    const Json& j = arr[i];
    if (!j.is_object()) throw InputError(path, "expected an object");
    json_refuse_unknown_keys(j, path, kLayerKeys);
    Layer l;
    l.name = json_string(j, "name", path);
    l.kind = read_enum<LayerKind>(j, "kind", path, parse_layer_kind, layer_kind_names(),
                                  LayerKind::other);
    l.first_op = static_cast<int>(non_negative_int(j, "first_op", path, INT_MAX));
    if (!j.contains("first_op"))
      throw InputError(field_path(path, "first_op"), "missing (required)");
    if (l.first_op != next)
      throw InputError(
          field_path(path, "first_op"),
          fmt::format("expected {} (layers cover the ops in order, without gaps or overlaps)",
                      next));
    l.num_ops = static_cast<int>(non_negative_int(j, "num_ops", path, INT_MAX));
    if (l.num_ops < 1 || l.num_ops > n - next)
      throw InputError(field_path(path, "num_ops"),
                       fmt::format("expected an integer from 1 to {}", n - next));
    for (int k = l.first_op; k < l.first_op + l.num_ops; ++k)
      ops[static_cast<std::size_t>(k)].layer = static_cast<int>(i);
    next += l.num_ops;
    layers.push_back(std::move(l));
  }
  if (next != n)
    throw InputError(
        "layers",
        fmt::format("expected layers covering all {} ops; they cover the first {}", n, next));
  return layers;
}

void check_graph(const Json& doc, const std::vector<Op>& ops) {
  const int n = static_cast<int>(ops.size());
  std::unordered_map<std::string, int> by_name;
  for (int i = 0; i < n; ++i) {
    const Op& op = ops[static_cast<std::size_t>(i)];
    const std::string path = index_path("ops", static_cast<std::size_t>(i));
    auto [it, fresh] = by_name.emplace(op.name, i);
    if (!fresh)
      throw InputError(
          field_path(path, "name"),
          fmt::format("expected a unique name ('{}' is also ops[{}])", op.name, it->second));
    const Json& j = doc["ops"][static_cast<std::size_t>(i)];
    if (j.contains("layer") &&
        (!j["layer"].is_number_integer() || j["layer"].get<long long>() != op.layer))
      throw InputError(field_path(path, "layer"),
                       fmt::format("expected {} (the layer whose range holds this op)", op.layer));
  }
  std::vector<std::vector<int>> successors(ops.size());
  for (int i = 0; i < n; ++i)
    for (int in : ops[static_cast<std::size_t>(i)].inputs)
      successors[static_cast<std::size_t>(in)].push_back(i);
  const std::vector<int> cycle = find_cycle(successors);
  if (!cycle.empty()) {
    std::vector<std::string> names;
    for (int v : cycle) names.push_back(ops[static_cast<std::size_t>(v)].name);
    throw InputError("ops", fmt::format("expected an acyclic graph; found the cycle {}",
                                        fmt::join(names, " -> ")));
  }
  for (int i = 0; i < n; ++i) {
    const auto& inputs = ops[static_cast<std::size_t>(i)].inputs;
    for (std::size_t k = 0; k < inputs.size(); ++k)
      if (inputs[k] >= i)
        throw InputError(
            index_path(field_path(index_path("ops", static_cast<std::size_t>(i)), "inputs"), k),
            fmt::format("expected an op listed before ops[{}] (ops must be in topological order)",
                        i));
  }
}

Model parse_model(const Json& doc) {
  if (!doc.is_object()) throw InputError("document", "expected a JSON object");
  std::vector<std::string> top = {"version", "name", "family", "dtype", "layers", "ops"};
  for (const IntField& f : kIntFields) top.emplace_back(f.key);
  json_refuse_unknown_keys(doc, "", top);
  json_require_version(doc, kVersion, "");
  Model m;
  m.name = json_string(doc, "name", "");
  m.family = read_enum<Family>(doc, "family", "", parse_family, family_names());
  m.dtype = read_enum<DType>(doc, "dtype", "", parse_dtype, dtype_names(), DType::bf16);
  for (const IntField& f : kIntFields)
    m.*f.field = static_cast<int>(non_negative_int(doc, f.key, "", INT_MAX));
  const Json& ops = require_array(doc, "ops", "");
  if (ops.empty()) throw InputError("ops", "expected at least one op");
  if (ops.size() > kMaxOps)
    throw InputError("ops",
                     fmt::format("expected at most {} ops; the graph has {}", kMaxOps, ops.size()));
  const int count = ops.size() > static_cast<std::size_t>(INT_MAX / 2)
                        ? INT_MAX / 2
                        : static_cast<int>(ops.size());
  long long total = 0;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    m.ops.push_back(read_op(ops[i], index_path("ops", i), count));
    total += m.ops.back().params;
    if (total > kMaxParams)
      throw InputError(
          field_path(index_path("ops", i), "params"),
          fmt::format("expected the model's parameters to total at most {}", kMaxParams));
  }
  m.layers = read_layers(doc, m.ops);
  check_graph(doc, m.ops);
  return m;
}

}  // namespace

nlohmann::json to_json(const Model& m) {
  Json j;
  j["version"] = kVersion;
  j["name"] = m.name;
  j["family"] = to_string(m.family);
  j["dtype"] = to_string(m.dtype);
  for (const IntField& f : kIntFields) j[f.key] = m.*f.field;
  Json layers = Json::array();
  for (const Layer& l : m.layers)
    layers.push_back(Json{{"name", l.name},
                          {"kind", to_string(l.kind)},
                          {"first_op", l.first_op},
                          {"num_ops", l.num_ops}});
  j["layers"] = std::move(layers);
  Json ops = Json::array();
  for (const Op& op : m.ops) ops.push_back(op_to_json(op));
  j["ops"] = std::move(ops);
  return j;
}

Result<Model> model_from_json(const nlohmann::json& doc, const std::string& source) {
  return capture_errors(source, [&] { return parse_model(doc); });
}

Result<Model> read_model_file(const std::string& file) {
  std::string text;
  try {
    text = read_text_file(file);
  } catch (const std::exception& e) {
    return Error{e.what()};
  }
  return capture_errors(file, [&] {
    Json doc;
    try {
      doc = parse_json_unique_keys(text);
    } catch (const Json::parse_error& e) {
      throw InputError(fmt::format("expected valid JSON ({})", e.what()));
    }
    return parse_model(doc);
  });
}

}  // namespace hetplan::model
