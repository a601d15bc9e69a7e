#include "op_kinds.h"

namespace hetplan::cost {

std::string_view op_kind_name(model::OpKind k) {
  for (const auto& [kind, name] : kOpKindNames)
    if (kind == k) return name;
  return "?";
}

std::optional<model::OpKind> parse_op_kind(std::string_view name) {
  for (const auto& [kind, n] : kOpKindNames)
    if (n == name) return kind;
  return std::nullopt;
}

bool is_gemm_like(model::OpKind k) {
  return k == model::OpKind::matmul || k == model::OpKind::batched_matmul ||
         k == model::OpKind::moe_router || k == model::OpKind::conv2d;
}

}  // namespace hetplan::cost
