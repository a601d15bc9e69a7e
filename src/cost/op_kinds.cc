#include "hetplan/cost/op_kinds.h"

namespace hetplan::cost {

bool is_gemm_like(model::OpKind k) {
  return k == model::OpKind::matmul || k == model::OpKind::batched_matmul ||
         k == model::OpKind::moe_router || k == model::OpKind::conv2d;
}

}  // namespace hetplan::cost
