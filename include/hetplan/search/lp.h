// The planners' linear and mixed-integer programs, behind a request/result boundary: a planner
// fills an LpRequest, the solver (GLPK) returns an LpResult, and check_lp_solution verifies the
// result against the request independently of the solver (bounds, rows, integrality, objective),
// so a planner never acts on a solution it has not checked.
#pragma once

#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "hetplan/core/error.h"

namespace hetplan::search {

inline constexpr double kInf = std::numeric_limits<double>::infinity();

struct LpVariable {
  std::string name;
  double lower = 0;
  double upper = kInf;
  double cost = 0;  // objective coefficient
  bool integer = false;
};

struct LpRow {
  std::string name;
  std::vector<std::pair<int, double>> terms;  // (variable index, coefficient)
  double lower = -kInf;
  double upper = kInf;
};

struct LpRequest {
  bool maximize = false;
  std::vector<LpVariable> variables;
  std::vector<LpRow> rows;
  // Branch and cut stops once it has created this many nodes of its search tree (0: no limit),
  // keeping the best integer solution found: a bound on the work that gives the same answer on
  // any machine, as a time limit would not.
  int node_limit = 0;
  // Seconds the solver may take (0: no limit): GLPK then stops (its tm_lim) and keeps its best
  // integer solution (limited), or fails when it has none. A search's time limit passes its
  // remaining time here; unlike node_limit, the answer then depends on the machine.
  double time_limit_s = 0;

  int add_variable(LpVariable v) {
    variables.push_back(std::move(v));
    return static_cast<int>(variables.size()) - 1;
  }
  void add_row(LpRow r) { rows.push_back(std::move(r)); }
};

// limited: branch and cut reached LpRequest::node_limit; the values are the best integer solution
// found, not proven optimal.
enum class LpStatus { optimal, limited, infeasible, unbounded, failed };
const char* to_string(LpStatus s);

struct LpResult {
  LpStatus status = LpStatus::failed;
  double objective = 0;
  std::vector<double> values;  // one per variable when optimal or limited
  std::string message;         // the solver's reason when not optimal
};

// Solves the program with GLPK: simplex for pure LPs, branch and cut when a variable is integer.
// Deterministic; safe to call from several threads (calls are serialised).
LpResult solve_lp(const LpRequest& req);

// Ok when `res` is optimal (or limited) and its values satisfy every bound and row within `tol`
// (relative to the magnitude of the row's terms), integer variables are integral, and its objective
// equals the one recomputed from the values; otherwise the first violation, naming the variable or
// row.
Result<bool> check_lp_solution(const LpRequest& req, const LpResult& res, double tol = 1e-6);

// solve_lp followed by check_lp_solution: the values, or why there are none. An optimal answer
// that fails the check (GLPK's presolver returned one: Lp tests) is solved again without the
// presolver before it counts as an error.
Result<LpResult> solve_checked(const LpRequest& req);

}  // namespace hetplan::search
