#include "tensor_parallel.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

namespace hetplan::runtime::detail {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

torch::Tensor all_reduce(const torch::Tensor& x, c10d::ProcessGroup* pg, c10d::ReduceOp op) {
  std::vector<torch::Tensor> t{x.contiguous().clone()};
  c10d::AllreduceOptions o;
  o.reduceOp = op;
  pg->allreduce(t, o)->wait();
  return t[0];
}

c10d::ProcessGroup* group_of(AutogradContext* ctx) {
  return reinterpret_cast<c10d::ProcessGroup*>(ctx->saved_data["pg"].toInt());
}

class CopyToGroup : public torch::autograd::Function<CopyToGroup> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, c10d::ProcessGroup* pg) {
    ctx->saved_data["pg"] = reinterpret_cast<std::int64_t>(pg);
    return x.clone();
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    return {all_reduce(grad[0], group_of(ctx), c10d::ReduceOp::SUM), torch::Tensor()};
  }
};

class ReduceFromGroup : public torch::autograd::Function<ReduceFromGroup> {
 public:
  static torch::Tensor forward(AutogradContext*, torch::Tensor x, c10d::ProcessGroup* pg) {
    return all_reduce(x, pg, c10d::ReduceOp::SUM);
  }
  static variable_list backward(AutogradContext*, variable_list grad) {
    return {grad[0], torch::Tensor()};
  }
};

}  // namespace

torch::Tensor copy_to_group(const torch::Tensor& x, const TensorParallel& tp) {
  return tp.active() ? CopyToGroup::apply(x, tp.group) : x;
}

torch::Tensor reduce_from_group(const torch::Tensor& x, const TensorParallel& tp) {
  return tp.active() ? ReduceFromGroup::apply(x, tp.group) : x;
}

torch::Tensor max_over_group(const torch::Tensor& x, const TensorParallel& tp) {
  return tp.active() ? all_reduce(x.detach(), tp.group, c10d::ReduceOp::MAX) : x.detach();
}

Result<std::pair<std::int64_t, std::int64_t>> unit_range(std::int64_t n, const TensorParallel& tp,
                                                         const std::string& what) {
  const int k = tp.size;
  std::vector<double> shares = tp.shares;
  if (shares.empty()) shares.assign(k, 1.0 / k);
  std::vector<std::int64_t> count(k);
  std::vector<std::pair<double, int>> rest;
  std::int64_t given = 0;
  for (int i = 0; i < k; ++i) {
    const double exact = shares[i] * static_cast<double>(n);
    count[i] = static_cast<std::int64_t>(std::floor(exact));
    given += count[i];
    rest.push_back({-(exact - std::floor(exact)), i});  // largest remainder first, then rank
  }
  std::sort(rest.begin(), rest.end());
  for (std::int64_t i = 0; i < n - given; ++i) ++count[rest[i % k].second];
  for (int i = 0; i < k; ++i)
    if (count[i] < 1)
      return Error{fmt::format(
          "plan: tp_shares: tensor-parallel rank {} would hold none of the {} {} (share {:.3g})", i,
          n, what, shares[i])};
  const std::int64_t begin =
      std::accumulate(count.begin(), count.begin() + tp.rank, std::int64_t{0});
  return std::make_pair(begin, begin + count[tp.rank]);
}

}  // namespace hetplan::runtime::detail
