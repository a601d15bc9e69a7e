// Op kinds as the cost model sees them: which ones run as GEMMs. Names in profile files are the
// model layer's (model::to_string / model::parse_op_kind), as in graph JSON.
#pragma once

#include <array>

#include "hetplan/model/model.h"

namespace hetplan::cost {

// Every OpKind, for listing the accepted names in errors and for calibrating each in turn.
inline constexpr std::array<model::OpKind, 12> kAllOpKinds{
    model::OpKind::matmul,    model::OpKind::batched_matmul, model::OpKind::softmax,
    model::OpKind::layernorm, model::OpKind::rmsnorm,        model::OpKind::elementwise,
    model::OpKind::embedding, model::OpKind::conv2d,         model::OpKind::pool,
    model::OpKind::batchnorm, model::OpKind::cross_entropy,  model::OpKind::moe_router,
};

// Ops that run as GEMMs on tensor cores: their speed follows the GEMM efficiency curve and their
// calibration points are keyed by FLOPs (all other kinds by bytes moved).
bool is_gemm_like(model::OpKind k);

}  // namespace hetplan::cost
