#include <fmt/format.h>
#include <glpk.h>

#include <algorithm>
#include <cmath>
#include <mutex>

#include "hetplan/search/lp.h"

namespace hetplan::search {
namespace {

// Per solve: the planner's programs are small (tens of variables), solved in well under a
// millisecond; this bound only keeps a stalled one from holding up the search. An iteration
// count, not a time, so that the answer does not depend on the machine's load.
constexpr int kIterationLimit = 100000;

std::mutex glpk_mutex;  // GLPK keeps per-thread environment state; one solve at a time is enough

int bound_type(double lo, double hi) {
  const bool has_lo = std::isfinite(lo), has_hi = std::isfinite(hi);
  if (has_lo && has_hi) return lo == hi ? GLP_FX : GLP_DB;
  if (has_lo) return GLP_LO;
  if (has_hi) return GLP_UP;
  return GLP_FR;
}

int silence(void*, const char*) { return 1; }  // GLPK's terminal output: swallowed

// Branch and cut's callback: stops the search once its tree has `*info` (int) nodes.
void stop_at_node_limit(glp_tree* tree, void* info) {
  int active = 0, current = 0, total = 0;
  glp_ios_tree_size(tree, &active, &current, &total);
  if (total >= *static_cast<const int*>(info)) glp_ios_terminate(tree);
}

}  // namespace

const char* to_string(LpStatus s) {
  switch (s) {
    case LpStatus::optimal:
      return "optimal";
    case LpStatus::limited:
      return "stopped at the node limit";
    case LpStatus::infeasible:
      return "infeasible";
    case LpStatus::unbounded:
      return "unbounded";
    case LpStatus::failed:
      return "failed";
  }
  return "?";
}

namespace {

// With GLPK's presolver or without: the presolver is the faster path, but it returned a wrong
// solution to a program it solves on its own (a one-device HAP ratio LP: Lp tests).
LpResult solve_glpk(const LpRequest& req, bool presolve) {
  std::lock_guard<std::mutex> lock(glpk_mutex);
  glp_term_hook(silence, nullptr);
  glp_prob* lp = glp_create_prob();
  glp_set_obj_dir(lp, req.maximize ? GLP_MAX : GLP_MIN);
  const int n = static_cast<int>(req.variables.size());
  const int m = static_cast<int>(req.rows.size());
  bool mip = false;
  if (n > 0) glp_add_cols(lp, n);
  for (int j = 0; j < n; ++j) {
    const auto& v = req.variables[j];
    glp_set_col_bnds(lp, j + 1, bound_type(v.lower, v.upper), std::isfinite(v.lower) ? v.lower : 0,
                     std::isfinite(v.upper) ? v.upper : 0);
    glp_set_obj_coef(lp, j + 1, v.cost);
    if (v.integer) {
      glp_set_col_kind(lp, j + 1, GLP_IV);
      mip = true;
    }
  }
  std::vector<int> ia{0}, ja{0};
  std::vector<double> ar{0};
  if (m > 0) glp_add_rows(lp, m);
  for (int i = 0; i < m; ++i) {
    const auto& r = req.rows[i];
    glp_set_row_bnds(lp, i + 1, bound_type(r.lower, r.upper), std::isfinite(r.lower) ? r.lower : 0,
                     std::isfinite(r.upper) ? r.upper : 0);
    for (auto [var, coef] : r.terms) {
      ia.push_back(i + 1);
      ja.push_back(var + 1);
      ar.push_back(coef);
    }
  }
  glp_load_matrix(lp, static_cast<int>(ia.size()) - 1, ia.data(), ja.data(), ar.data());

  LpResult res;
  glp_smcp smcp;
  glp_init_smcp(&smcp);
  smcp.msg_lev = GLP_MSG_OFF;
  smcp.presolve = presolve ? GLP_ON : GLP_OFF;
  // Bounded: a stalled simplex gives the caller "failed"; scaling keeps the new GEMM costs' wide
  // range of coefficients from stalling it (a HAP ratio LP took minutes unscaled).
  smcp.it_lim = kIterationLimit;
  const int tm_lim =
      req.time_limit_s > 0 ? std::max(1, static_cast<int>(std::lround(req.time_limit_s * 1e3))) : 0;
  if (tm_lim > 0) smcp.tm_lim = tm_lim;
  glp_scale_prob(lp, GLP_SF_AUTO);
  const int rc = glp_simplex(lp, &smcp);
  int status = glp_get_status(lp);
  if (rc == GLP_ENOPFS || status == GLP_NOFEAS) {
    res.status = LpStatus::infeasible;
    res.message = "no feasible solution";
  } else if (rc == GLP_ENODFS || status == GLP_UNBND) {
    res.status = LpStatus::unbounded;
    res.message = "the objective is unbounded";
  } else if (rc == GLP_ETMLIM) {
    res.status = LpStatus::failed;
    res.message =
        fmt::format("the simplex method ran past the time limit of {:g} s", req.time_limit_s);
  } else if (rc != 0 || status != GLP_OPT) {
    res.status = LpStatus::failed;
    res.message = fmt::format("GLPK simplex returned {} (status {})", rc, status);
  } else if (!mip) {
    res.status = LpStatus::optimal;
    res.objective = glp_get_obj_val(lp);
    for (int j = 0; j < n; ++j) res.values.push_back(glp_get_col_prim(lp, j + 1));
  } else {
    glp_iocp iocp;
    glp_init_iocp(&iocp);
    iocp.msg_lev = GLP_MSG_OFF;
    int node_limit = req.node_limit;
    if (node_limit > 0) {
      iocp.cb_func = stop_at_node_limit;
      iocp.cb_info = &node_limit;
    }
    if (tm_lim > 0) iocp.tm_lim = tm_lim;
    const int mrc = glp_intopt(lp, &iocp);
    status = glp_mip_status(lp);
    const bool stopped = (mrc == GLP_ESTOP || mrc == GLP_ETMLIM) && status == GLP_FEAS;
    if ((mrc == 0 && status == GLP_OPT) || stopped) {
      res.status = stopped ? LpStatus::limited : LpStatus::optimal;
      res.objective = glp_mip_obj_val(lp);
      for (int j = 0; j < n; ++j) res.values.push_back(glp_mip_col_val(lp, j + 1));
    } else if (status == GLP_NOFEAS || mrc == GLP_ENOPFS) {
      res.status = LpStatus::infeasible;
      res.message = "no integer solution";
    } else if (mrc == GLP_ETMLIM) {
      res.status = LpStatus::failed;
      res.message =
          fmt::format("branch and cut found no integer solution within {:g} s", req.time_limit_s);
    } else {
      res.status = LpStatus::failed;
      res.message = fmt::format("GLPK branch and cut returned {} (status {})", mrc, status);
    }
  }
  glp_delete_prob(lp);
  glp_term_hook(nullptr, nullptr);
  return res;
}

}  // namespace

LpResult solve_lp(const LpRequest& req) { return solve_glpk(req, true); }

Result<bool> check_lp_solution(const LpRequest& req, const LpResult& res, double tol) {
  if (res.status != LpStatus::optimal && res.status != LpStatus::limited)
    return Error{fmt::format("LP: {} ({})", to_string(res.status), res.message)};
  if (res.values.size() != req.variables.size())
    return Error{
        fmt::format("LP: {} values for {} variables", res.values.size(), req.variables.size())};
  double objective = 0;
  for (std::size_t j = 0; j < req.variables.size(); ++j) {
    const auto& v = req.variables[j];
    const double x = res.values[j];
    const double slack = tol * std::max(1.0, std::fabs(x));
    if (!std::isfinite(x) || x < v.lower - slack || x > v.upper + slack)
      return Error{
          fmt::format("LP: variable {} = {} outside [{}, {}]", v.name, x, v.lower, v.upper)};
    if (v.integer && std::fabs(x - std::round(x)) > 1e-6)
      return Error{fmt::format("LP: integer variable {} = {} is not integral", v.name, x)};
    objective += v.cost * x;
  }
  for (const auto& r : req.rows) {
    double lhs = 0, scale = 1;
    for (auto [var, coef] : r.terms) {
      lhs += coef * res.values[var];
      scale = std::max(scale, std::fabs(coef * res.values[var]));
    }
    if (lhs < r.lower - tol * scale || lhs > r.upper + tol * scale)
      return Error{fmt::format("LP: row {} = {} outside [{}, {}]", r.name, lhs, r.lower, r.upper)};
  }
  if (std::fabs(objective - res.objective) > tol * std::max(1.0, std::fabs(objective)))
    return Error{
        fmt::format("LP: reported objective {} but the values give {}", res.objective, objective)};
  return true;
}

Result<LpResult> solve_checked(const LpRequest& req) {
  LpResult res = solve_glpk(req, true);
  auto ok = check_lp_solution(req, res);
  if (ok) return res;
  if (res.status != LpStatus::optimal && res.status != LpStatus::limited) return ok.error();
  // A wrong answer from the presolver: solve again without it.
  LpResult again = solve_glpk(req, false);
  if (check_lp_solution(req, again)) return again;
  return ok.error();
}

}  // namespace hetplan::search
