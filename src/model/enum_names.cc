#include "enum_names.h"

#include "hetplan/model/model.h"

namespace hetplan::model {
namespace {

using detail::name_of;
using detail::value_of;

constexpr std::pair<DType, const char*> kDTypes[] = {
    {DType::fp32, "fp32"},   {DType::fp16, "fp16"},   {DType::bf16, "bf16"}, {DType::fp8, "fp8"},
    {DType::int32, "int32"}, {DType::int64, "int64"}, {DType::tf32, "tf32"},
};

constexpr std::pair<OpKind, const char*> kOpKinds[] = {
    {OpKind::matmul, "matmul"},
    {OpKind::batched_matmul, "batched_matmul"},
    {OpKind::softmax, "softmax"},
    {OpKind::layernorm, "layernorm"},
    {OpKind::rmsnorm, "rmsnorm"},
    {OpKind::elementwise, "elementwise"},
    {OpKind::embedding, "embedding"},
    {OpKind::conv2d, "conv2d"},
    {OpKind::pool, "pool"},
    {OpKind::batchnorm, "batchnorm"},
    {OpKind::cross_entropy, "cross_entropy"},
    {OpKind::moe_router, "moe_router"},
};

constexpr std::pair<OpFn, const char*> kOpFns[] = {
    {OpFn::none, "none"},
    {OpFn::conv2d, "conv2d"},
    {OpFn::batchnorm, "batchnorm"},
    {OpFn::relu, "relu"},
    {OpFn::add, "add"},
    {OpFn::concat, "concat"},
    {OpFn::max_pool, "max_pool"},
    {OpFn::avg_pool, "avg_pool"},
    {OpFn::adaptive_avg_pool, "adaptive_avg_pool"},
    {OpFn::linear, "linear"},
    {OpFn::dropout, "dropout"},
    {OpFn::cross_entropy, "cross_entropy"},
    {OpFn::embedding, "embedding"},
    {OpFn::positions, "positions"},
    {OpFn::layernorm, "layernorm"},
    {OpFn::gelu, "gelu"},
    {OpFn::tanh, "tanh"},
    {OpFn::softmax, "softmax"},
    {OpFn::attention_scores, "attention_scores"},
    {OpFn::attention_context, "attention_context"},
    {OpFn::learned_positions, "learned_positions"},
    {OpFn::class_token, "class_token"},
};

constexpr std::pair<ShardKind, const char*> kShardKinds[] = {
    {ShardKind::replicated, "replicated"},
    {ShardKind::column, "column"},
    {ShardKind::row, "row"},
    {ShardKind::heads, "heads"},
    {ShardKind::vocab, "vocab"},
    {ShardKind::expert, "expert"},
    {ShardKind::channel, "channel"},
};

constexpr std::pair<LayerKind, const char*> kLayerKinds[] = {
    {LayerKind::embedding, "embedding"}, {LayerKind::transformer, "transformer"},
    {LayerKind::head, "head"},           {LayerKind::conv_block, "conv_block"},
    {LayerKind::other, "other"},
};

constexpr std::pair<Family, const char*> kFamilies[] = {
    {Family::decoder_lm, "decoder_lm"},
    {Family::encoder, "encoder"},
    {Family::vision_transformer, "vision_transformer"},
    {Family::moe_lm, "moe_lm"},
    {Family::cnn, "cnn"},
    {Family::mlp, "mlp"},
};

}  // namespace

const char* to_string(DType t) { return name_of(kDTypes, t); }
const char* to_string(OpKind k) { return name_of(kOpKinds, k); }
const char* to_string(OpFn f) { return name_of(kOpFns, f); }
const char* to_string(ShardKind k) { return name_of(kShardKinds, k); }
const char* to_string(LayerKind k) { return name_of(kLayerKinds, k); }
const char* to_string(Family f) { return name_of(kFamilies, f); }

std::optional<DType> parse_dtype(std::string_view s) { return value_of(kDTypes, s); }
std::optional<OpKind> parse_op_kind(std::string_view s) { return value_of(kOpKinds, s); }
std::optional<OpFn> parse_op_fn(std::string_view s) { return value_of(kOpFns, s); }
std::optional<ShardKind> parse_shard_kind(std::string_view s) { return value_of(kShardKinds, s); }
std::optional<LayerKind> parse_layer_kind(std::string_view s) { return value_of(kLayerKinds, s); }
std::optional<Family> parse_family(std::string_view s) { return value_of(kFamilies, s); }

}  // namespace hetplan::model
