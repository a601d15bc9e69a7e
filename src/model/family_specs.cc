#include "family_specs.h"

#include <fmt/format.h>

#include <algorithm>

#include "builders.h"

namespace hetplan::model::detail {
namespace {

// Bounds that keep every count far from integer overflow and every graph a sane size.
constexpr std::int64_t kMaxLayers = 10'000;
constexpr std::int64_t kMaxWidth = 1'000'000;
constexpr std::int64_t kMaxSeq = 10'000'000;
constexpr std::int64_t kMaxVocab = 100'000'000;
constexpr std::int64_t kMaxImage = 8192;
constexpr double kMaxParameters = 1e15;  // keeps every parameter sum far inside int64

// Estimated parameters of a transformer: attention, FFN (times experts) and embeddings.
void check_size(const SpecArgs& a, double layers, double hidden, double attn_width, double kv_width,
                double ffn, double ffn_matrices, double experts, double embeddings) {
  const double per_layer =
      hidden * (2 * attn_width + 2 * kv_width) + experts * ffn_matrices * hidden * ffn;
  const double total = layers * per_layer + embeddings * hidden;
  if (total > kMaxParameters)
    a.fail_spec(
        fmt::format("expected a model of at most {:g} parameters; this spec has about {:.3g}",
                    kMaxParameters, total));
}

// The keys every transformer family shares: layers, hidden, heads (and head_dim).
struct TransformerDims {
  std::int64_t layers, hidden, heads, head_dim;
};
TransformerDims read_dims(SpecArgs& a, bool allow_head_dim) {
  TransformerDims d{};
  d.layers = a.required("layers", 1, kMaxLayers);
  d.hidden = a.required("hidden", 1, kMaxWidth);
  d.heads = a.required("heads", 1, d.hidden);
  if (allow_head_dim && a.has("head_dim")) {
    d.head_dim = a.integer("head_dim", 0, 1, kMaxWidth);
  } else {
    if (allow_head_dim) a.integer("head_dim", 0, 1, kMaxWidth);  // registers the key as known
    if (d.hidden % d.heads != 0)
      a.fail("heads", fmt::format("expected a divisor of hidden ({})", d.hidden));
    d.head_dim = d.hidden / d.heads;
  }
  return d;
}

// The optional dtype= key every family takes: the compute and activation dtype.
DType read_dtype(SpecArgs& a) {
  return *parse_dtype(a.choice("dtype", "bf16", {"bf16", "fp16", "fp32", "tf32"}));
}

Model gpt(SpecArgs& a) {
  const TransformerDims d = read_dims(a, true);
  GptConfig c;
  c.layers = d.layers;
  c.hidden = d.hidden;
  c.heads = d.heads;
  c.head_dim = d.head_dim;
  c.seq = a.integer("seq", 2048, 1, kMaxSeq);
  c.vocab = a.integer("vocab", 50257, 1, kMaxVocab);
  c.ffn = a.integer("ffn", 4 * c.hidden, 1, 10 * kMaxWidth);
  c.embed = a.integer("embed", c.hidden, 1, kMaxWidth);
  c.positions = a.integer("positions", c.seq, 1, kMaxSeq);
  if (c.positions < c.seq) a.fail("positions", fmt::format("expected at least seq ({})", c.seq));
  c.pre_norm = a.choice("norm", "pre", {"pre", "post"}) == "pre";
  c.tied = a.flag("tied", true);
  c.dtype = read_dtype(a);
  a.finish();
  const double attn = static_cast<double>(c.heads * c.head_dim);
  check_size(
      a, static_cast<double>(c.layers), static_cast<double>(c.hidden), attn, attn,
      static_cast<double>(c.ffn), 2, 1,
      static_cast<double>(c.vocab + c.positions));  // unknown keys are reported before any building
  return build_gpt(c);
}

LlamaConfig llama_config(SpecArgs& a, std::int64_t default_seq, std::int64_t default_vocab) {
  const TransformerDims d = read_dims(a, true);
  LlamaConfig c;
  c.layers = d.layers;
  c.hidden = d.hidden;
  c.heads = d.heads;
  c.head_dim = d.head_dim;
  c.kv_heads = a.integer("kv_heads", c.heads, 1, c.heads);
  if (c.heads % c.kv_heads != 0)
    a.fail("kv_heads", fmt::format("expected a divisor of heads ({})", c.heads));
  // Llama's default: 2/3 of 4h, rounded up to a multiple of 256 (11008 for h = 4096).
  const std::int64_t swiglu_ffn = (8 * c.hidden / 3 + 255) / 256 * 256;
  c.ffn = a.integer("ffn", swiglu_ffn, 1, 10 * kMaxWidth);
  c.seq = a.integer("seq", default_seq, 1, kMaxSeq);
  c.vocab = a.integer("vocab", default_vocab, 1, kMaxVocab);
  c.tied = a.flag("tied", false);
  c.dtype = read_dtype(a);
  return c;
}

void check_llama_size(const SpecArgs& a, const LlamaConfig& c) {
  check_size(a, static_cast<double>(c.layers), static_cast<double>(c.hidden),
             static_cast<double>(c.heads * c.head_dim),
             static_cast<double>(c.kv_heads * c.head_dim), static_cast<double>(c.ffn), 3,
             static_cast<double>(std::max<std::int64_t>(c.experts, 1)),
             2 * static_cast<double>(c.vocab));
}

Model llama(SpecArgs& a) {
  const LlamaConfig c = llama_config(a, 4096, 32000);
  a.finish();
  check_llama_size(a, c);
  return build_llama(c);
}

Model moe(SpecArgs& a) {
  LlamaConfig c = llama_config(a, 4096, 32000);
  c.experts = a.integer("experts", 8, 1, 4096);
  c.top_k = a.integer("top_k", 2, 1, 4096);
  if (c.top_k > c.experts) a.fail("top_k", fmt::format("expected at most experts ({})", c.experts));
  a.finish();
  check_llama_size(a, c);
  return build_llama(c);
}

Model bert(SpecArgs& a) {
  const TransformerDims d = read_dims(a, false);
  BertConfig c;
  c.layers = d.layers;
  c.hidden = d.hidden;
  c.heads = d.heads;
  c.seq = a.integer("seq", 512, 1, kMaxSeq);
  c.vocab = a.integer("vocab", 30522, 1, kMaxVocab);
  c.ffn = a.integer("ffn", 4 * c.hidden, 1, 10 * kMaxWidth);
  c.classification =
      a.choice("head", "pretraining", {"pretraining", "classification"}) == "classification";
  c.labels = a.integer("labels", 2, 1, kMaxVocab);
  if (!c.classification && a.has("labels"))
    a.fail("labels", "expected only with head=classification");
  c.dtype = read_dtype(a);
  a.finish();
  return build_bert(c);
}

Model vit(SpecArgs& a) {
  const TransformerDims d = read_dims(a, false);
  VitConfig c;
  c.layers = d.layers;
  c.hidden = d.hidden;
  c.heads = d.heads;
  c.mlp = a.integer("mlp", 4 * c.hidden, 1, 10 * kMaxWidth);
  c.patch = a.integer("patch", 16, 1, kMaxImage);
  c.image = a.integer("image", 224, 1, kMaxImage);
  if (c.image % c.patch != 0)
    a.fail("image", fmt::format("expected a multiple of patch ({})", c.patch));
  c.classes = a.integer("classes", 1000, 1, kMaxVocab);
  c.dtype = read_dtype(a);
  a.finish();
  return build_vit(c);
}

Model resnet(SpecArgs& a) {
  ResnetConfig c;
  c.depth = static_cast<int>(a.integer("depth", 50, 1, 1000));
  if (c.depth != 18 && c.depth != 34 && c.depth != 50 && c.depth != 101 && c.depth != 152)
    a.fail("depth", "expected 18, 34, 50, 101 or 152");
  c.width = a.integer("width", 64, 1, 4096);
  c.image = a.integer("image", 224, 32, kMaxImage);
  c.classes = a.integer("classes", 1000, 1, kMaxVocab);
  c.dtype = read_dtype(a);
  a.finish();
  return build_resnet(c);
}

Model vgg(SpecArgs& a) {
  VggConfig c;
  c.depth = static_cast<int>(a.integer("depth", 16, 1, 1000));
  if (c.depth != 11 && c.depth != 13 && c.depth != 16 && c.depth != 19)
    a.fail("depth", "expected 11, 13, 16 or 19");
  c.image = a.integer("image", 224, 32, kMaxImage);
  c.classes = a.integer("classes", 1000, 1, kMaxVocab);
  c.dtype = read_dtype(a);
  a.finish();
  return build_vgg(c);
}

Model inception(SpecArgs& a) {
  a.choice("version", "v3", {"v3", "3"});
  InceptionConfig c;
  c.image = a.integer("image", 299, 75, kMaxImage);
  c.classes = a.integer("classes", 1000, 1, kMaxVocab);
  c.dtype = read_dtype(a);
  a.finish();
  return build_inception_v3(c);
}

Model mlp(SpecArgs& a) {
  MlpConfig c;
  c.layers = a.required("layers", 0, kMaxLayers);
  c.hidden = a.required("hidden", 1, kMaxWidth);
  c.in = a.required("in", 1, kMaxWidth);
  c.out = a.required("out", 1, kMaxVocab);
  c.dtype = read_dtype(a);
  a.finish();
  return build_mlp(c);
}

struct FamilyEntry {
  const char* name;
  Model (*build)(SpecArgs&);
};
constexpr FamilyEntry kFamilies[] = {
    {"gpt", gpt},       {"llama", llama}, {"bert", bert},           {"vit", vit}, {"moe", moe},
    {"resnet", resnet}, {"vgg", vgg},     {"inception", inception}, {"mlp", mlp},
};

}  // namespace

const std::vector<std::string>& family_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const FamilyEntry& f : kFamilies) v.emplace_back(f.name);
    return v;
  }();
  return names;
}

std::optional<Model> build_family(std::string_view family, SpecArgs& args) {
  for (const FamilyEntry& f : kFamilies) {
    if (family != f.name) continue;
    return f.build(args);
  }
  return std::nullopt;
}

}  // namespace hetplan::model::detail
