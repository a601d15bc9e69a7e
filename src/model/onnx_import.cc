#include "hetplan/model/onnx_import.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdio>
#include <fstream>
#include <functional>
#include <numeric>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "graph_builder.h"
#include "onnx_fold.h"

namespace hetplan::model {
namespace {

using detail::kBatchNormFlops;
using detail::kLayerNormFlops;
using detail::kMaskBytes;
using detail::kRmsNormFlops;
using detail::kSoftmaxFlops;

// Larger files keep their weights outside the protobuf (external data): the graph itself is small.
constexpr std::int64_t kMaxFileBytes = std::int64_t{2} * 1024 * 1024 * 1024 - 1;

constexpr int kMaxFoldRounds = 64;
// Bounds on shapes: a dimension, and a tensor's elements (exact in a double).
constexpr std::int64_t kMaxDimension = std::int64_t{1} << 40;
constexpr double kMaxElements = 9.0e15;
// A symbolic dimension other than the batch that the user gave no size for (a sequence length,
// most often) is taken as this, with a warning: BERT's and many encoders' longest sequence.
constexpr std::int64_t kDefaultDimension = 512;

// Bytes per element of an ONNX TensorProto data type; 0 for strings and unknown types.
int elem_bytes(int t) {
  switch (t) {
    case onnx::TensorProto::FLOAT:
    case onnx::TensorProto::INT32:
    case onnx::TensorProto::UINT32:
      return 4;
    case onnx::TensorProto::UINT8:
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::BOOL:
      return 1;
    case onnx::TensorProto::UINT16:
    case onnx::TensorProto::INT16:
    case onnx::TensorProto::FLOAT16:
    case onnx::TensorProto::BFLOAT16:
      return 2;
    case onnx::TensorProto::INT64:
    case onnx::TensorProto::UINT64:
    case onnx::TensorProto::DOUBLE:
    case onnx::TensorProto::COMPLEX64:
      return 8;
    case onnx::TensorProto::COMPLEX128:
      return 16;
    default:
      return 0;
  }
}

bool is_float(int t) {
  return t == onnx::TensorProto::FLOAT || t == onnx::TensorProto::FLOAT16 ||
         t == onnx::TensorProto::BFLOAT16 || t == onnx::TensorProto::DOUBLE;
}

std::optional<DType> dtype_of(int t) {
  switch (t) {
    case onnx::TensorProto::FLOAT:
    case onnx::TensorProto::DOUBLE:
      return DType::fp32;
    case onnx::TensorProto::FLOAT16:
      return DType::fp16;
    case onnx::TensorProto::BFLOAT16:
      return DType::bf16;
    default:
      return std::nullopt;
  }
}

// How an ONNX op type is costed.
enum class Cost {
  free,       // a view: reshape-like, no data moves (no op of its own)
  move,       // copies data: memory-bound, no FLOPs
  pointwise,  // memory-bound elementwise: `flops` per output element
  reduce,     // memory-bound reduction: `flops` per input element
  matmul,
  gemm,
  conv,
  pool,
  global_pool,
  normalize,  // a norm or a softmax: its own op kind, `flops` per output element
  dropout,
  gather,  // a table lookup when it reads an initializer, else a move
  loss,
  recurrent,  // LSTM, GRU, RNN: `flops` gates, each a GEMM on the input and on the hidden state
};

struct OpType {
  Cost cost;
  double flops = 0;
  OpKind kind = OpKind::elementwise;  // Cost::normalize: which norm (or softmax)
};

const std::unordered_map<std::string, OpType>& op_types() {
  static const std::unordered_map<std::string, OpType> kTypes = [] {
    std::unordered_map<std::string, OpType> t;
    for (const char* s : {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"})
      t[s] = {Cost::free};
    for (const char* s : {"Transpose",
                          "Concat",
                          "Slice",
                          "Split",
                          "Expand",
                          "Pad",
                          "Tile",
                          "Cast",
                          "CastLike",
                          "GatherElements",
                          "GatherND",
                          "ScatterND",
                          "ScatterElements",
                          "Scatter",
                          "DepthToSpace",
                          "SpaceToDepth",
                          "Resize",
                          "Upsample",
                          "Trilu",
                          "Compress",
                          "Sequence",
                          "OneHot"})
      t[s] = {Cost::move};
    for (const char* s : {"Add",
                          "Sub",
                          "Mul",
                          "Div",
                          "Neg",
                          "Abs",
                          "Relu",
                          "LeakyRelu",
                          "PRelu",
                          "Max",
                          "Min",
                          "Sum",
                          "Mean",
                          "Clip",
                          "Where",
                          "Sign",
                          "Floor",
                          "Ceil",
                          "Round",
                          "Reciprocal",
                          "Sqrt",
                          "Pow",
                          "ThresholdedRelu",
                          "Shrink",
                          "Mod",
                          "BitShift"})
      t[s] = {Cost::pointwise, 1};
    for (const char* s :
         {"Exp",  "Log",  "Sigmoid",  "HardSigmoid", "HardSwish", "Tanh",  "Erf",   "Elu",
          "Selu", "Celu", "Softplus", "Softsign",    "Sin",       "Cos",   "Tan",   "Asin",
          "Acos", "Atan", "Sinh",     "Cosh",        "Asinh",     "Acosh", "Atanh", "Mish"})
      t[s] = {Cost::pointwise, 4};
    t["Gelu"] = {Cost::pointwise, detail::kGeluFlops};
    for (const char* s : {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd",
                          "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
                          "ReduceSumSquare", "ArgMax", "ArgMin", "CumSum", "TopK"})
      t[s] = {Cost::reduce, 1};
    t["MatMul"] = {Cost::matmul};
    t["Einsum"] = {Cost::matmul};
    t["Gemm"] = {Cost::gemm};
    t["Conv"] = {Cost::conv};
    t["ConvTranspose"] = {Cost::conv};
    for (const char* s : {"MaxPool", "AveragePool", "LpPool"}) t[s] = {Cost::pool};
    for (const char* s : {"GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"})
      t[s] = {Cost::global_pool};
    t["BatchNormalization"] = {Cost::normalize, kBatchNormFlops, OpKind::batchnorm};
    t["InstanceNormalization"] = {Cost::normalize, kBatchNormFlops, OpKind::batchnorm};
    t["GroupNormalization"] = {Cost::normalize, kBatchNormFlops, OpKind::batchnorm};
    t["LayerNormalization"] = {Cost::normalize, kLayerNormFlops, OpKind::layernorm};
    t["SimplifiedLayerNormalization"] = {Cost::normalize, kRmsNormFlops, OpKind::rmsnorm};
    t["RMSNormalization"] = {Cost::normalize, kRmsNormFlops, OpKind::rmsnorm};
    t["LpNormalization"] = {Cost::normalize, kLayerNormFlops, OpKind::layernorm};
    t["Softmax"] = {Cost::normalize, kSoftmaxFlops, OpKind::softmax};
    t["LogSoftmax"] = {Cost::normalize, kSoftmaxFlops, OpKind::softmax};
    t["Dropout"] = {Cost::dropout};
    t["Gather"] = {Cost::gather};
    t["SoftmaxCrossEntropyLoss"] = {Cost::loss};
    t["NegativeLogLikelihoodLoss"] = {Cost::loss};
    t["LSTM"] = {Cost::recurrent, 4};
    t["GRU"] = {Cost::recurrent, 3};
    t["RNN"] = {Cost::recurrent, 1};
    t["LRN"] = {Cost::pointwise, 6};  // a window sum of squares, scale, power, divide
    t["Hardmax"] = {Cost::pointwise, 1};
    t["MeanVarianceNormalization"] = {Cost::normalize, kLayerNormFlops, OpKind::layernorm};
    for (const char* s : {"QuantizeLinear", "DequantizeLinear", "Bernoulli"})
      t[s] = {Cost::pointwise, 2};
    for (const char* s : {"GridSample", "RoiAlign", "MaxRoiPool", "MaxUnpool", "ReverseSequence"})
      t[s] = {Cost::move};
    return t;
  }();
  return kTypes;
}

// Ops that only compute shapes or constants: never an op of their own, whatever they read.
bool shape_only(const std::string& type) {
  static const std::unordered_set<std::string> kShape = {
      "Constant", "Shape",        "Size",          "ConstantOfShape",  "Range",
      "EyeLike",  "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
      "NonZero"};
  return kShape.count(type) > 0;
}

struct TensorInfo {
  std::vector<std::int64_t> shape;  // empty with known == false: not inferred
  bool known = false;
  int elem_type = 0;
  bool dynamic = false;        // depends on a graph input (an activation), not only on weights
  std::vector<int> producers;  // hetplan ops whose outputs this tensor carries
  std::vector<std::string> weights;  // initializers it is computed from (when not dynamic)
};

double numel(const std::vector<std::int64_t>& shape) {
  double n = 1;
  for (std::int64_t d : shape) n *= static_cast<double>(d);
  return n;
}

bool is_scoped(const std::string& name) { return name.size() > 1 && name.front() == '/'; }

// The layer an op belongs to, from the exporter's scope ("/blocks/blocks.3/attn/MatMul" ->
// "blocks/blocks.3"): the scope up to its first numbered module, else its first two levels.
std::string layer_key(const std::string& node_name) {
  if (!is_scoped(node_name)) return "";
  std::vector<std::string> parts;
  std::stringstream in(node_name.substr(1));
  for (std::string p; std::getline(in, p, '/');)
    if (!p.empty()) parts.push_back(p);
  if (parts.size() <= 1) return "";  // the op's own name only
  parts.pop_back();
  auto numbered = [](const std::string& p) {
    const std::size_t dot = p.find_last_of('.');
    const std::string tail = dot == std::string::npos ? p : p.substr(dot + 1);
    return !tail.empty() &&
           std::all_of(tail.begin(), tail.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  std::size_t keep = std::min<std::size_t>(2, parts.size());
  for (std::size_t i = 0; i < parts.size(); ++i)
    if (numbered(parts[i])) {
      keep = i + 1;
      break;
    }
  std::string key = parts[0];
  for (std::size_t i = 1; i < keep; ++i) key += "/" + parts[i];
  return key;
}

std::int64_t attr_int(const onnx::NodeProto& n, const std::string& name, std::int64_t dflt) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return a.i();
  return dflt;
}

std::vector<std::int64_t> attr_ints(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return {a.ints().begin(), a.ints().end()};
  return {};
}

class Importer {
 public:
  Importer(std::string file, const OnnxOptions& opt) : file_(std::move(file)), opt_(opt) {}

  // From the file, or from `bytes` read already (file names it in messages).
  OnnxModel run(const std::string* bytes = nullptr) {
    if (bytes)
      parse(*bytes, false);
    else
      read();
    bind_inputs();
    infer();
    collect_shapes();
    walk();
    finish();
    return std::move(out_);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw InputError(what); }

  void read() {
    std::ifstream in(file_, std::ios::binary | std::ios::ate);
    if (!in) fail("cannot open the file");
    const std::streamoff size = in.tellg();
    if (size > kMaxFileBytes)
      fail(
          "expected an ONNX file under 2 GiB (larger models keep their weights as external "
          "data)");
    in.seekg(0);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    parse(bytes, true);
  }

  void parse(const std::string& bytes, bool from_file) {
    if (bytes.empty()) fail("expected an ONNX model; the file is empty");
    if (static_cast<std::int64_t>(bytes.size()) > kMaxFileBytes)
      fail(
          "expected an ONNX file under 2 GiB (larger models keep their weights as external "
          "data)");
    google::protobuf::io::ArrayInputStream raw(bytes.data(), static_cast<int>(bytes.size()));
    google::protobuf::io::CodedInputStream coded(&raw);
    coded.SetTotalBytesLimit(INT_MAX);
    if (!proto_.ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage())
      fail(
          "expected an ONNX model (a ModelProto); the file is not one, or is truncated or "
          "corrupt");
    if (!proto_.has_graph() || proto_.graph().node_size() == 0)
      fail("expected an ONNX model with a graph of nodes; the file has none (truncated?)");
    const bool external =
        std::any_of(proto_.graph().initializer().begin(), proto_.graph().initializer().end(),
                    [](const onnx::TensorProto& t) {
                      return t.data_location() == onnx::TensorProto::EXTERNAL;
                    });
    try {
      // With external data the checker reads the file again, to find the data beside it.
      if (external && from_file)
        onnx::checker::check_model(file_);
      else
        onnx::checker::check_model(proto_);
    } catch (const std::exception& e) {
      std::string msg = e.what();
      std::replace(msg.begin(), msg.end(), '\n', ' ');
      fail(fmt::format("the ONNX checker refuses the model: {}", msg));
    }
    // Only the weights' shapes are needed: their data goes (inference runs on a copy).
    for (auto& t : *proto_.mutable_graph()->mutable_initializer())
      if (is_float(t.data_type())) {
        t.clear_raw_data();
        t.clear_float_data();
        t.clear_double_data();
        t.clear_int32_data();
        t.clear_external_data();
        t.set_data_location(onnx::TensorProto::DEFAULT);
      }
  }

  // The batch dimension of every graph input: a symbolic one is bound to 1, a fixed one divides
  // costs. Other symbolic dimensions take their sizes from the options.
  void bind_inputs() {
    auto* g = proto_.mutable_graph();
    std::unordered_set<std::string> inits;
    for (const auto& t : g->initializer()) inits.insert(t.name());
    std::vector<std::string> unbound;
    std::string unbound_name;  // the first, for the example in the warning
    for (auto& in : *g->mutable_input()) {
      if (inits.count(in.name()) || !in.type().has_tensor_type() ||
          !in.type().tensor_type().has_shape())
        continue;  // no shape at all: left to inference
      auto* shape = in.mutable_type()->mutable_tensor_type()->mutable_shape();
      for (int d = 0; d < shape->dim_size(); ++d) {
        auto* dim = shape->mutable_dim(d);
        if (d == opt_.batch_dim) {
          if (dim->has_dim_value()) {
            if (batch_ > 0 && batch_ != dim->dim_value())
              fail(
                  fmt::format("input '{}': expected the same batch size ({}) in dimension {} of "
                              "every input; it has {} (--batch-dim chooses the dimension)",
                              in.name(), batch_, d, dim->dim_value()));
            batch_ = dim->dim_value();
          } else {
            if (!dim->dim_param().empty()) batch_names_.insert(dim->dim_param());
            dim->set_dim_value(1);
            if (batch_ <= 0)
              batch_ = 1;
            else if (batch_ != 1)
              fail(
                  fmt::format("input '{}': expected the same batch size in dimension {} of every "
                              "input; others have {}, this one is symbolic",
                              in.name(), d, batch_));
          }
          continue;
        }
        if (dim->has_dim_value()) continue;
        const std::string name = dim->dim_param();
        if (auto it = opt_.dims.find(name); !name.empty() && it != opt_.dims.end()) {
          dim->set_dim_value(it->second);
        } else if (batch_names_.count(name)) {
          dim->set_dim_value(1);
        } else {
          unbound.push_back(fmt::format("input '{}' dimension {} ('{}')", in.name(), d,
                                        name.empty() ? "unnamed" : name));
          if (unbound_name.empty()) unbound_name = name;
          dim->set_dim_value(kDefaultDimension);
        }
      }
    }
    if (!unbound.empty())
      out_.warnings.push_back(fmt::format(
          "{}: symbolic dimensions taken as {}: {}; give their sizes after the file name, e.g. "
          "{}:{}=2048 (the batch is dimension {}; --batch-dim chooses another)",
          file_, kDefaultDimension, fmt::join(unbound, ", "), file_,
          unbound_name.empty() ? "sequence" : unbound_name, opt_.batch_dim));
    if (batch_ <= 0)
      fail(
          fmt::format("expected a graph input with a batch dimension {} (--batch-dim chooses "
                      "it)",
                      opt_.batch_dim));
    for (const auto& [name, size] : opt_.dims)
      if (size < 1 || size > kMaxDimension)
        fail(fmt::format("{}={}: expected a size from 1 to {}", name, size, kMaxDimension));
  }

  void infer() {
    // Shapes kept from the file can be stale once the batch is bound: inference redoes them.
    proto_.mutable_graph()->clear_value_info();
    for (auto& o : *proto_.mutable_graph()->mutable_output())
      o.mutable_type()->mutable_tensor_type()->clear_shape();
    if (std::string bad = infer_in_child(); !bad.empty()) fail(bad);
  }

  // Shape inference with the shape arithmetic folded, in place. Each round folds what the last
  // inference found; a chain of views needs a round per view.
  void infer_and_fold() {
    onnx::ShapeInferenceOptions options(false, 0, true);
    for (int round = 0; round < kMaxFoldRounds; ++round) {
      onnx::shape_inference::InferShapes(proto_, onnx::OpSchemaRegistry::Instance(), options);
      int changed = detail::fold_shape_arithmetic(proto_);
      if (opt_.allow_unknown_ops) changed += detail::assume_unknown_op_shapes(proto_);
      if (changed == 0) break;
    }
  }

  // libonnx 1.12's inference reads out of bounds on some malformed graphs (a Conv whose weight's
  // rank is not its input's), which must be an error, not a crash: it runs in a child process,
  // which sends the inferred model back (the weights' data is gone already, so it is small).
  // Returns an error message, or "".
  std::string infer_in_child() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return "cannot run shape inference: pipe failed";
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) {
      ::close(fds[0]);
      ::close(fds[1]);
      return "cannot run shape inference: fork failed";
    }
    if (pid == 0) {
      ::close(fds[0]);
      std::string out;
      char status = 0;
      try {
        infer_and_fold();
        if (proto_.ByteSizeLong() >= static_cast<std::size_t>(INT_MAX)) {
          status = 1;
          out = "the inferred graph is over 2 GiB";
        } else {
          out = proto_.SerializeAsString();
        }
      } catch (const std::exception& e) {
        status = 1;
        out = e.what();
      }
      out.insert(out.begin(), status);
      for (std::size_t done = 0; done < out.size();) {
        const ssize_t n = ::write(fds[1], out.data() + done, out.size() - done);
        if (n <= 0) ::_exit(3);
        done += static_cast<std::size_t>(n);
      }
      ::_exit(0);
    }
    ::close(fds[1]);
    std::string in;
    char buf[1 << 16];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) != 0;) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;
      in.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fds[0]);
    int wstatus = 0;
    while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0 || in.empty())
      return "ONNX shape inference crashed on this graph (malformed: a weight whose rank does "
             "not fit its op, or similar)";
    if (in[0] != 0) {
      std::string msg = in.substr(1);
      std::replace(msg.begin(), msg.end(), '\n', ' ');
      return fmt::format("ONNX shape inference failed: {}", msg);
    }
    google::protobuf::io::ArrayInputStream raw(in.data() + 1, static_cast<int>(in.size() - 1));
    google::protobuf::io::CodedInputStream coded(&raw);
    coded.SetTotalBytesLimit(INT_MAX);
    if (!proto_.ParseFromCodedStream(&coded))
      return "ONNX shape inference returned a model that does not parse";
    return "";
  }

  void note_value(const onnx::ValueInfoProto& v) {
    if (!v.type().has_tensor_type()) return;
    TensorInfo& t = tensors_[v.name()];
    const auto& tt = v.type().tensor_type();
    t.elem_type = tt.elem_type();
    if (!tt.has_shape()) return;
    std::vector<std::int64_t> shape;
    for (const auto& dim : tt.shape().dim()) {
      if (!dim.has_dim_value() || dim.dim_value() < 0) return;
      if (dim.dim_value() > kMaxDimension)
        fail(fmt::format("tensor '{}': expected dimensions of at most {}; inference gives {}",
                         v.name(), kMaxDimension, dim.dim_value()));
      shape.push_back(dim.dim_value());
    }
    if (numel(shape) > kMaxElements)
      fail(fmt::format("tensor '{}': expected at most {} elements; inference gives {:.3g}",
                       v.name(), kMaxElements, numel(shape)));
    t.shape = std::move(shape);
    t.known = true;
  }

  void collect_shapes() {
    const auto& g = proto_.graph();
    for (const auto& v : g.value_info()) note_value(v);
    for (const auto& v : g.output()) note_value(v);
    for (const auto& v : g.input()) note_value(v);
    std::unordered_set<std::string> bn_stats;
    for (const auto& n : g.node())
      if (n.op_type() == "BatchNormalization")
        for (int i = 3; i < std::min(5, n.input_size()); ++i) bn_stats.insert(n.input(i));
    for (const auto& init : g.initializer()) {
      TensorInfo& t = tensors_[init.name()];
      t.shape.assign(init.dims().begin(), init.dims().end());
      t.known = true;
      t.elem_type = init.data_type();
      t.dynamic = false;
      t.producers.clear();
      for (std::int64_t d : t.shape)
        if (d < 0 || d > kMaxDimension)
          fail(fmt::format("initializer '{}': expected dimensions from 0 to {}; it has {}",
                           init.name(), kMaxDimension, d));
      if (numel(t.shape) > kMaxElements)
        fail(fmt::format("initializer '{}': expected at most {} elements; it has {:.3g}",
                         init.name(), kMaxElements, numel(t.shape)));
      const std::int64_t n = static_cast<std::int64_t>(numel(t.shape));
      if (!is_float(init.data_type())) continue;
      if (!file_dtype_) file_dtype_ = dtype_of(init.data_type());
      if (bn_stats.count(init.name())) {
        out_.non_trainable_elements += n;
        continue;
      }
      t.weights = {init.name()};
      weight_elements_[init.name()] = n;
      weight_order_.push_back(init.name());
    }
    std::unordered_set<std::string> inits;
    for (const auto& init : g.initializer()) inits.insert(init.name());
    for (const auto& in : g.input())
      if (!inits.count(in.name())) tensors_[in.name()].dynamic = true;
  }

  const TensorInfo& tensor(const onnx::NodeProto& n, const std::string& name) const {
    auto it = tensors_.find(name);
    if (it == tensors_.end())
      fail(
          fmt::format("node '{}' ({}): reads tensor '{}', which no graph input, initializer or "
                      "earlier node provides",
                      n.name(), n.op_type(), name));
    return it->second;
  }

  // Bytes per element as costed: the option's dtype for floats, else the tensor's own.
  double bytes_per(int elem_type) const {
    if (is_float(elem_type) && opt_.dtype) return dtype_bytes(*opt_.dtype);
    return elem_bytes(elem_type);
  }
  // Per-sample bytes of an activation.
  double act_bytes(const TensorInfo& t) const {
    return numel(t.shape) * bytes_per(t.elem_type) / static_cast<double>(batch_);
  }
  double per_sample(double total) const { return total / static_cast<double>(batch_); }

  const std::vector<std::int64_t>& shape_of(const onnx::NodeProto& n, const TensorInfo& t,
                                            const std::string& name) const {
    if (!t.known)
      fail(
          fmt::format("node '{}' ({}): the shape of '{}' could not be inferred; give the "
                      "model's symbolic dimensions fixed sizes",
                      n.name(), n.op_type(), name));
    return t.shape;
  }

  void walk() {
    const auto& g = proto_.graph();
    std::map<std::string, int> unknown;
    for (const auto& n : g.node()) {
      std::vector<const TensorInfo*> ins;
      bool dynamic = false;
      for (const auto& name : n.input()) {
        if (name.empty()) {
          ins.push_back(nullptr);
          continue;
        }
        ins.push_back(&tensor(n, name));
        dynamic = dynamic || ins.back()->dynamic;
      }
      // An output of unknown type (an op inference does not know) counts as float when a float
      // activation goes in.
      bool float_out = false;
      const bool float_in = std::any_of(ins.begin(), ins.end(), [](const TensorInfo* t) {
        return t && t->dynamic && is_float(t->elem_type);
      });
      for (const auto& name : n.output()) {
        auto it = tensors_.find(name);
        const int type = it == tensors_.end() ? 0 : it->second.elem_type;
        if (is_float(type) || (type == 0 && float_in && !name.empty())) float_out = true;
      }
      // Union of what the inputs carry.
      std::set<int> producers;
      std::set<std::string> weights;
      for (const TensorInfo* t : ins) {
        if (!t) continue;
        producers.insert(t->producers.begin(), t->producers.end());
        weights.insert(t->weights.begin(), t->weights.end());
      }
      auto pass_through = [&](std::set<int> prods, std::set<std::string> ws) {
        for (const auto& name : n.output()) {
          TensorInfo& t = tensors_[name];
          t.dynamic = dynamic;
          t.producers.assign(prods.begin(), prods.end());
          t.weights.assign(ws.begin(), ws.end());
        }
      };
      const auto type_it = op_types().find(n.op_type());
      const bool known = n.domain().empty() || n.domain() == "ai.onnx";
      // Weight preprocessing (a transposed weight) and shape arithmetic: no op of their own.
      if (!dynamic || shape_only(n.op_type()) || !float_out) {
        pass_through(dynamic ? producers : std::set<int>{},
                     dynamic ? std::set<std::string>{} : weights);
        continue;
      }
      if (!known || type_it == op_types().end()) {
        ++unknown[n.domain().empty() ? n.op_type() : n.domain() + "." + n.op_type()];
      }
      // Once an op is refused, the rest are only scanned for more: their shapes may depend on it.
      if (!unknown.empty() && !opt_.allow_unknown_ops) {
        pass_through(producers, {});
        continue;
      }
      const OpType type =
          (!known || type_it == op_types().end()) ? OpType{Cost::move} : type_it->second;
      if (type.cost == Cost::free) {
        const TensorInfo* data = ins.empty() ? nullptr : ins[0];
        pass_through(
            data ? std::set<int>(data->producers.begin(), data->producers.end()) : producers, {});
        continue;
      }
      const int index = emit(n, type, ins, producers, weights);
      pass_through({index}, {});
    }
    if (!unknown.empty()) {
      std::vector<std::string> list;
      for (const auto& [type, count] : unknown) list.push_back(fmt::format("{} x{}", type, count));
      if (!opt_.allow_unknown_ops)
        fail(
            fmt::format("ops hetplan cannot cost: {}; allow-unknown-ops (--allow-unknown-ops) "
                        "costs them as memory-bound elementwise ops",
                        fmt::join(list, ", ")));
      out_.warnings.push_back(
          fmt::format("{}: costed as memory-bound elementwise ops (allow-unknown-ops): {}", file_,
                      fmt::join(list, ", ")));
    }
    if (out_.model.ops.empty())
      fail("expected at least one op that computes on the graph's inputs; the graph has none");
  }

  std::string unique_name(const onnx::NodeProto& n) {
    std::string base = n.name().empty() ? n.op_type() : n.name();
    if (!base.empty() && base.front() == '/') base.erase(0, 1);
    std::replace(base.begin(), base.end(), '/', '.');
    int& seen = names_[base];
    ++seen;
    return seen == 1 ? base : fmt::format("{}#{}", base, seen);
  }

  // Appends the op for node n; returns its index.
  int emit(const onnx::NodeProto& n, const OpType& type, const std::vector<const TensorInfo*>& ins,
           const std::set<int>& producers, const std::set<std::string>& weights) {
    Op op;
    op.name = unique_name(n);
    op.inputs.assign(producers.begin(), producers.end());
    // The first output given (a recurrent op may give only its last state).
    int first = 0;
    while (first + 1 < n.output_size() && n.output(first).empty()) ++first;
    const TensorInfo& out = tensor(n, n.output(first));
    const auto& out_shape = shape_of(n, out, n.output(first));
    const double out_elems = per_sample(numel(out_shape));
    const double out_bytes = act_bytes(out);
    double read = 0;
    for (std::size_t i = 0; i < ins.size(); ++i)
      if (ins[i] && ins[i]->dynamic && is_float(ins[i]->elem_type)) {
        shape_of(n, *ins[i], n.input(static_cast<int>(i)));
        read += act_bytes(*ins[i]);
      }
    op.bytes_read = read;
    op.bytes_written = out_bytes;
    if (n.op_type() == "Split")
      for (int i = 1; i < n.output_size(); ++i) {
        const TensorInfo& o = tensor(n, n.output(i));
        if (o.known) op.bytes_written += act_bytes(o);
      }
    // Saved activations: what autograd keeps for this op's backward pass, set below (a dropout's
    // mask, a loss's logits) and by keep_for_backward (tensors, counted once on their producer).
    op.saved_bytes = 0;
    // Parameters: the trainable initializers it reads, each counted by its first reader only.
    for (const std::string& w : weights)
      if (counted_.insert(w).second) op.params += weight_elements_.at(w);
    const TensorInfo* x = ins.empty() ? nullptr : ins[0];
    const TensorInfo* w = ins.size() > 1 ? ins[1] : nullptr;
    switch (type.cost) {
      case Cost::free:
      case Cost::move:
        op.kind = OpKind::elementwise;
        break;
      case Cost::pointwise:
        op.kind = OpKind::elementwise;
        op.flops = type.flops * out_elems;
        break;
      case Cost::reduce:
        op.kind = OpKind::elementwise;
        op.flops = type.flops * (x && x->known ? per_sample(numel(x->shape)) : out_elems);
        break;
      case Cost::matmul:
        if (n.op_type() == "Einsum") {
          // The contraction's size is not recoverable from shapes alone; costed as its output
          // times the largest input's last dimension.
          op.kind = OpKind::batched_matmul;
          const double k = x && x->known && !x->shape.empty() ? x->shape.back() : 1;
          op.flops = 2 * out_elems * k;
          break;
        }
        if (!x || !w) fail(fmt::format("node '{}' (MatMul): expected two inputs", n.name()));
        matmul(n, op, *x, *w, out_shape);
        break;
      case Cost::gemm:
        if (!x || !w) fail(fmt::format("node '{}' (Gemm): expected two inputs", n.name()));
        gemm(n, op, *x, *w);
        break;
      case Cost::conv:
        if (!w) fail(fmt::format("node '{}' ({}): expected a weight", n.name(), n.op_type()));
        conv(n, op, x, *w, out_shape);
        break;
      case Cost::pool: {
        op.kind = OpKind::pool;
        const auto kernel = attr_ints(n, "kernel_shape");
        op.flops = out_elems * std::max(1.0, numel(kernel));
        break;
      }
      case Cost::global_pool:
        op.kind = OpKind::pool;
        op.flops = x && x->known ? per_sample(numel(x->shape)) : out_elems;
        break;
      case Cost::normalize:
        op.kind = type.kind;
        op.flops = type.flops * out_elems;
        op.attention_core = type.kind == OpKind::softmax;
        break;
      case Cost::dropout: {
        op.kind = OpKind::elementwise;
        op.flops = detail::kDropoutFlops * out_elems;
        op.saved_bytes = kMaskBytes * out_elems;
        op.bytes_written += kMaskBytes * out_elems;
        op.output_bytes = out_bytes;
        op.attention_core = x && std::any_of(x->producers.begin(), x->producers.end(), [&](int p) {
                              return ops()[static_cast<std::size_t>(p)].kind == OpKind::softmax;
                            });
        break;
      }
      case Cost::gather:
        if (x && !x->dynamic && is_float(x->elem_type)) {
          op.kind = OpKind::embedding;
          op.bytes_read = out_bytes;  // the rows looked up
          if (out_.model.hidden == 0)
            out_.model.hidden =
                out_shape.empty()
                    ? 0
                    : static_cast<int>(std::min<std::int64_t>(INT_MAX, out_shape.back()));
        } else {
          op.kind = OpKind::elementwise;
        }
        break;
      case Cost::recurrent: {
        // X [seq, batch, in] (or batch first), W [dirs, gates * h, in], R [dirs, gates * h, h]:
        // every token of every direction takes the gates' GEMMs on its input and on the state,
        // and about four elementwise ops per gate element.
        if (!x || !w || ins.size() < 3 || !ins[2])
          fail(fmt::format("node '{}' ({}): expected X, W and R", n.name(), n.op_type()));
        const auto& xs = shape_of(n, *x, n.input(0));
        const auto& ws = shape_of(n, *w, n.input(1));
        const auto& rs = shape_of(n, *ins[2], n.input(2));
        if (xs.size() != 3 || ws.size() != 3 || rs.size() != 3)
          fail(fmt::format("node '{}' ({}): expected X, W and R of rank 3", n.name(), n.op_type()));
        const double dirs = static_cast<double>(ws[0]), rows = static_cast<double>(ws[1]);
        const double in = static_cast<double>(ws[2]), h = static_cast<double>(rs[2]);
        const double tokens = xs[2] > 0 ? per_sample(numel(xs) / static_cast<double>(xs[2])) : 0;
        op.kind = OpKind::matmul;
        op.flops = tokens * dirs * (2 * rows * (in + h) + 4 * rows);
        op.gemm = {static_cast<std::int64_t>(std::max(1.0, tokens)), ws[1] * ws[0], ws[2] + rs[2],
                   1};
        (void)type;
        break;
      }
      case Cost::loss:
        op.kind = OpKind::cross_entropy;
        op.flops = detail::kCrossEntropyFlops * (x && x->known ? per_sample(numel(x->shape)) : 0);
        op.saved_bytes = x && x->known ? per_sample(numel(x->shape)) * detail::kFp32Bytes : 0;
        break;
    }
    out_.model.ops.push_back(std::move(op));
    keys_.push_back(layer_key(n.name()));
    output_saved_.push_back(false);
    const int index = static_cast<int>(out_.model.ops.size()) - 1;
    keep_for_backward(n, type, ins, index);
    return index;
  }

  // What autograd keeps of an op's tensors for its backward pass: a GEMM or a norm its inputs,
  // a softmax or a ReLU its output, an add nothing, a product the factors the other's gradient
  // needs. A kept tensor counts once, on the op that made it (views share its storage); one that
  // no op made (a graph input) counts on this op.
  void keep_for_backward(const onnx::NodeProto& n, const OpType& type,
                         const std::vector<const TensorInfo*>& ins, int index) {
    static const std::unordered_set<std::string> kNothing = {"Add",
                                                             "Sub",
                                                             "Neg",
                                                             "Sum",
                                                             "Mean",
                                                             "Sign",
                                                             "Floor",
                                                             "Ceil",
                                                             "Round",
                                                             "Mod",
                                                             "BitShift",
                                                             "Where",
                                                             "ReduceMean",
                                                             "ReduceSum",
                                                             "CumSum",
                                                             "AveragePool",
                                                             "GlobalAveragePool"};
    static const std::unordered_set<std::string> kOutput = {
        "Relu", "Sigmoid",  "Tanh",        "Exp",        "Sqrt",    "Elu",       "Selu",
        "Celu", "Softplus", "HardSigmoid", "Reciprocal", "Softmax", "LogSoftmax"};
    auto activation = [&](std::size_t i) {
      return i < ins.size() && ins[i] && ins[i]->dynamic && is_float(ins[i]->elem_type);
    };
    std::vector<std::size_t> kept;
    bool output = false;
    const std::string& t = n.op_type();
    switch (type.cost) {
      case Cost::free:
      case Cost::move:
      case Cost::gather:
      case Cost::dropout:  // its mask, set with its costs
      case Cost::loss:     // its logits, likewise
        return;
      default:
        break;
    }
    if (kNothing.count(t)) return;
    if (kOutput.count(t)) {
      output = true;
    } else if (t == "Mul") {  // each factor's gradient needs the other
      if (activation(0) && activation(1)) kept = {0, 1};
    } else if (t == "Div") {  // a / b: both when b is an activation, else only the constant
      if (activation(1)) kept = {0, 1};
    } else if (type.cost == Cost::reduce || type.cost == Cost::pool) {
      kept = {0};  // max-like reductions and pools: where the maximum was
    } else {
      for (std::size_t i = 0; i < ins.size(); ++i) kept.push_back(i);
    }
    if (type.cost == Cost::recurrent) output = true;
    Op& op = out_.model.ops[static_cast<std::size_t>(index)];
    if (output) output_saved_[static_cast<std::size_t>(index)] = true;
    for (std::size_t i : kept) {
      if (!activation(i)) continue;
      const TensorInfo& in = *ins[i];
      if (in.producers.size() == 1 && in.producers[0] != index)
        output_saved_[static_cast<std::size_t>(in.producers[0])] = true;
      else
        op.saved_bytes += act_bytes(in);
    }
  }

  const std::vector<Op>& ops() const { return out_.model.ops; }

  void matmul(const onnx::NodeProto& n, Op& op, const TensorInfo& a, const TensorInfo& b,
              const std::vector<std::int64_t>& out_shape) {
    const auto& as = shape_of(n, a, n.input(0));
    const auto& bs = shape_of(n, b, n.input(1));
    if (as.empty() || bs.empty() || out_shape.empty())
      fail(fmt::format("node '{}' (MatMul): expected inputs of rank 1 or more", n.name()));
    const std::int64_t k = as.back();
    const std::int64_t nn = bs.size() == 1 ? 1 : bs.back();
    // Every output row (none when the output is empty).
    const double rows = nn > 0 ? numel(out_shape) / static_cast<double>(nn) : 0;
    const double per_sample_rows = per_sample(rows);
    op.flops = 2 * per_sample_rows * static_cast<double>(nn) * static_cast<double>(k);
    if (!b.dynamic || !a.dynamic) {  // activation x weight (either way round): a linear layer
      op.kind = OpKind::matmul;
      op.gemm = {static_cast<std::int64_t>(std::max(1.0, per_sample_rows)), nn, k, 1};
    } else {
      op.kind = OpKind::batched_matmul;
      op.attention_core = true;
      const std::int64_t m = as.size() == 1 ? 1 : as[as.size() - 2];
      const double batches = m > 0 ? per_sample(rows / static_cast<double>(m)) : 0;
      op.gemm = {m, nn, k, static_cast<std::int64_t>(std::max(1.0, batches))};
    }
  }

  void gemm(const onnx::NodeProto& n, Op& op, const TensorInfo& a, const TensorInfo& b) {
    const auto& as = shape_of(n, a, n.input(0));
    const auto& bs = shape_of(n, b, n.input(1));
    if (as.size() != 2 || bs.size() != 2)
      fail(fmt::format("node '{}' (Gemm): expected two matrices", n.name()));
    const bool ta = attr_int(n, "transA", 0) != 0, tb = attr_int(n, "transB", 0) != 0;
    const std::int64_t m = ta ? as[1] : as[0], k = ta ? as[0] : as[1];
    const std::int64_t nn = tb ? bs[0] : bs[1];
    const double rows = per_sample(static_cast<double>(m));
    op.flops = 2 * rows * static_cast<double>(nn) * static_cast<double>(k);
    if (n.input_size() > 2 && !n.input(2).empty()) op.flops += rows * static_cast<double>(nn);
    op.kind = b.dynamic ? OpKind::batched_matmul : OpKind::matmul;
    op.gemm = {static_cast<std::int64_t>(std::max(1.0, rows)), nn, k, 1};
  }

  void conv(const onnx::NodeProto& n, Op& op, const TensorInfo* x, const TensorInfo& w,
            const std::vector<std::int64_t>& out_shape) {
    const auto& ws = shape_of(n, w, n.input(1));
    if (x && x->known && x->shape.size() != ws.size())
      fail(fmt::format("node '{}' ({}): expected a weight of its input's rank ({}); it has rank {}",
                       n.name(), n.op_type(), x->shape.size(), ws.size()));
    if (ws.size() < 3 || out_shape.size() < 3)
      fail(
          fmt::format("node '{}' ({}): expected a weight [out, in/groups, kernel...] and an "
                      "output [batch, channels, spatial...]",
                      n.name(), n.op_type()));
    const bool transposed = n.op_type() == "ConvTranspose";
    const std::int64_t groups = std::max<std::int64_t>(1, attr_int(n, "group", 1));
    double kernel = 1;
    for (std::size_t i = 2; i < ws.size(); ++i) kernel *= static_cast<double>(ws[i]);
    const double out_elems = per_sample(numel(out_shape));
    auto spatial_of = [](const std::vector<std::int64_t>& shape) {
      double sp = 1;
      for (std::size_t i = 2; i < shape.size(); ++i) sp *= static_cast<double>(shape[i]);
      return sp;
    };
    op.kind = OpKind::conv2d;
    if (!transposed) {
      // Weight [out, in/g, k...]: each output element takes (in/g)*k multiply-adds; per group a
      // GEMM of [output pixels x (in/g)*k] by [(in/g)*k x out/g].
      const double reduce = static_cast<double>(ws[1]) * kernel;
      op.flops = 2 * out_elems * reduce;
      op.gemm = {static_cast<std::int64_t>(spatial_of(out_shape)), out_shape[1] / groups,
                 static_cast<std::int64_t>(reduce), groups};
    } else {
      // Weight [in, out/g, k...]: each input element spreads over (out/g)*k outputs.
      if (!x || !x->known)
        fail(
            fmt::format("node '{}' (ConvTranspose): the shape of its input could not be "
                        "inferred",
                        n.name()));
      const double spread = static_cast<double>(ws[1]) * kernel;
      op.flops = 2 * per_sample(numel(x->shape)) * spread;
      op.gemm = {static_cast<std::int64_t>(spatial_of(x->shape)), static_cast<std::int64_t>(spread),
                 ws[0] / groups, groups};
    }
    if (n.input_size() > 2 && !n.input(2).empty()) op.flops += out_elems;
  }

  // Layers from scope names; unscoped graphs get a layer per weighted op.
  void finish() {
    Model& m = out_.model;
    for (std::size_t i = 0; i < m.ops.size(); ++i)
      if (output_saved_[i]) m.ops[i].saved_bytes += m.output_bytes(static_cast<int>(i));
    for (const auto& w : weight_order_)
      if (counted_.insert(w).second) m.ops.front().params += weight_elements_.at(w);
    const bool scoped =
        std::any_of(keys_.begin(), keys_.end(), [](const std::string& k) { return !k.empty(); });
    std::string current;
    bool current_weighted = false;
    for (int i = 0; i < static_cast<int>(m.ops.size()); ++i) {
      const Op& op = m.ops[static_cast<std::size_t>(i)];
      const std::string& key = keys_[static_cast<std::size_t>(i)];
      bool start = m.layers.empty();
      if (scoped)
        start = start || (!key.empty() && key != current);
      else
        start = start || (op.params > 0 && current_weighted);
      if (start) {
        Layer l;
        l.name = scoped ? (key.empty() ? "input" : key) : fmt::format("layer{}", m.layers.size());
        std::replace(l.name.begin(), l.name.end(), '/', '.');
        l.first_op = i;
        m.layers.push_back(l);
        current = key;
        current_weighted = false;
      }
      if (!key.empty()) current = key;
      current_weighted = current_weighted || op.params > 0;
      m.layers.back().num_ops++;
    }
    // Layer names must be unique: a scope that recurs gets a suffix.
    std::map<std::string, int> seen;
    for (Layer& l : m.layers)
      if (int c = ++seen[l.name]; c > 1) l.name += fmt::format("#{}", c);
    for (Op& op : m.ops) op.layer = -1;
    for (int li = 0; li < static_cast<int>(m.layers.size()); ++li) {
      Layer& l = m.layers[static_cast<std::size_t>(li)];
      bool conv = false, attention = false, embedding = false, matmul = false;
      for (int i = l.first_op; i < l.first_op + l.num_ops; ++i) {
        Op& op = m.ops[static_cast<std::size_t>(i)];
        op.layer = li;
        conv = conv || op.kind == OpKind::conv2d;
        attention = attention || op.kind == OpKind::batched_matmul;
        embedding = embedding || op.kind == OpKind::embedding;
        matmul = matmul || op.kind == OpKind::matmul;
      }
      l.kind = attention                                                 ? LayerKind::transformer
               : conv                                                    ? LayerKind::conv_block
               : embedding                                               ? LayerKind::embedding
               : (matmul && li + 1 == static_cast<int>(m.layers.size())) ? LayerKind::head
                                                                         : LayerKind::other;
    }
    describe(m);
  }

  // The summary fields a model carries (family, dtype, sequence, widths, blocks).
  void describe(Model& m) {
    m.dtype = opt_.dtype ? *opt_.dtype : file_dtype_.value_or(DType::fp32);
    const bool conv = std::any_of(m.ops.begin(), m.ops.end(),
                                  [](const Op& op) { return op.kind == OpKind::conv2d; });
    // Never mlp or a decoder: the runtime's stage modules for those families would run their own
    // architecture, not the file's.
    m.family = conv ? Family::cnn : Family::encoder;
    for (const Layer& l : m.layers)
      if (l.kind == LayerKind::transformer || l.kind == LayerKind::conv_block) ++m.num_blocks;
    for (const auto& in : proto_.graph().input()) {
      const TensorInfo& t = tensors_.at(in.name());
      if (!t.dynamic || !t.known) continue;
      if (!is_float(t.elem_type) && t.shape.size() >= 2 && opt_.batch_dim == 0)
        m.seq_len = static_cast<int>(std::min<std::int64_t>(INT_MAX, t.shape[1]));
      if (is_float(t.elem_type) && t.shape.size() == 4)
        m.image_size = static_cast<int>(std::min<std::int64_t>(INT_MAX, t.shape[3]));
    }
  }

  std::string file_;
  OnnxOptions opt_;
  onnx::ModelProto proto_;
  std::int64_t batch_ = 0;
  std::unordered_set<std::string> batch_names_;
  std::unordered_map<std::string, TensorInfo> tensors_;
  std::unordered_map<std::string, std::int64_t> weight_elements_;
  std::vector<std::string> weight_order_;
  std::unordered_set<std::string> counted_;
  std::optional<DType> file_dtype_;
  std::map<std::string, int> names_;
  std::vector<std::string> keys_;
  std::vector<bool> output_saved_;  // per op: autograd keeps its output for the backward pass
  OnnxModel out_;
};

bool parse_int(std::string_view s, std::int64_t& v) {
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

Result<OnnxModel> read_onnx_file(const std::string& file, const OnnxOptions& options) {
  return capture_errors(file, [&] { return Importer(file, options).run(); });
}

Result<OnnxModel> read_onnx_bytes(const std::string& bytes, const std::string& name,
                                  const OnnxOptions& options) {
  return capture_errors(name, [&] { return Importer(name, options).run(&bytes); });
}

std::optional<Result<std::pair<std::string, OnnxOptions>>> parse_onnx_spec(std::string_view text) {
  // The first ".onnx" that ends the path: at the end, or before the options' colon.
  std::size_t end = std::string_view::npos;
  for (std::size_t at = text.find(".onnx"); at != std::string_view::npos;
       at = text.find(".onnx", at + 1))
    if (at + 5 == text.size() || text[at + 5] == ':') {
      end = at + 5;
      break;
    }
  if (end == std::string_view::npos) return std::nullopt;
  std::pair<std::string, OnnxOptions> out{std::string(text.substr(0, end)), {}};
  OnnxOptions& o = out.second;
  std::string_view rest = end == text.size() ? std::string_view{} : text.substr(end + 1);
  const std::string label = out.first;
  std::set<std::string> given;
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    const std::size_t eq = item.find('=');
    const std::string key(item.substr(0, eq));
    const std::string value(eq == std::string_view::npos ? "" : item.substr(eq + 1));
    if (key.empty() || eq == std::string_view::npos)
      return Error{
          fmt::format("{}: '{}': expected key=value (batch-dim=N, allow-unknown-ops="
                      "true, dtype=bf16, or a symbolic dimension's size: sequence=512)",
                      label, item)};
    if (!given.insert(key).second)
      return Error{fmt::format("{}: {}: expected each key once", label, key)};
    std::int64_t v = 0;
    if (key == "batch-dim") {
      if (!parse_int(value, v) || v < 0 || v > 16)
        return Error{
            fmt::format("{}: batch-dim={}: expected a dimension index from 0 to 16", label, value)};
      o.batch_dim = static_cast<int>(v);
    } else if (key == "allow-unknown-ops") {
      if (value != "true" && value != "false" && value != "1" && value != "0")
        return Error{fmt::format("{}: allow-unknown-ops={}: expected true or false", label, value)};
      o.allow_unknown_ops = value == "true" || value == "1";
    } else if (key == "dtype") {
      o.dtype = parse_dtype(value);
      if (!o.dtype || (*o.dtype != DType::fp32 && *o.dtype != DType::fp16 &&
                       *o.dtype != DType::bf16 && *o.dtype != DType::tf32))
        return Error{fmt::format("{}: dtype={}: expected fp32, fp16, bf16 or tf32", label, value)};
    } else {
      if (!parse_int(value, v) || v < 1)
        return Error{
            fmt::format("{}: {}={}: expected a positive size for the symbolic "
                        "dimension '{}'",
                        label, key, value, key)};
      o.dims[key] = v;
    }
  }
  return out;
}

}  // namespace hetplan::model
