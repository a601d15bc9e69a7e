// Names of op kinds in calibration profiles, and which kinds the GEMM efficiency curve applies to.
#pragma once

#include <array>
#include <optional>
#include <string_view>

#include "hetplan/model/model.h"

namespace hetplan::cost {

// Every OpKind with the name used in profile files (the enumerator's own name, as in graph JSON).
inline constexpr std::array<std::pair<model::OpKind, std::string_view>, 12> kOpKindNames{{
    {model::OpKind::matmul, "matmul"},
    {model::OpKind::batched_matmul, "batched_matmul"},
    {model::OpKind::softmax, "softmax"},
    {model::OpKind::layernorm, "layernorm"},
    {model::OpKind::rmsnorm, "rmsnorm"},
    {model::OpKind::elementwise, "elementwise"},
    {model::OpKind::embedding, "embedding"},
    {model::OpKind::conv2d, "conv2d"},
    {model::OpKind::pool, "pool"},
    {model::OpKind::batchnorm, "batchnorm"},
    {model::OpKind::cross_entropy, "cross_entropy"},
    {model::OpKind::moe_router, "moe_router"},
}};

std::string_view op_kind_name(model::OpKind k);
std::optional<model::OpKind> parse_op_kind(std::string_view name);

// Ops that run as GEMMs on tensor cores: their speed follows the GEMM efficiency curve and their
// calibration points are keyed by FLOPs (all other kinds by bytes moved).
bool is_gemm_like(model::OpKind k);

}  // namespace hetplan::cost
