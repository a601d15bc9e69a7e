// Runs the hetplan binary in a shell and captures its exit code, stdout and stderr.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace hetplan::cli::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string slurp(const std::string& file) {
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// `args` is appended to the binary path verbatim (quote as for sh).
inline CommandResult run_hetplan(const std::string& args) {
  const auto dir = std::filesystem::temp_directory_path();
  const std::string out = (dir / ("hetplan_test_out_" + std::to_string(::getpid()))).string();
  const std::string err = (dir / ("hetplan_test_err_" + std::to_string(::getpid()))).string();
  const std::string cmd = std::string(HETPLAN_BINARY) + " " + args + " >" + out + " 2>" + err;
  const int status = std::system(cmd.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}

// `hetplan <command> --plan <plan_file>` with the plan's `cluster` naming a file that does not
// exist (the plan file is restored after): what a plan whose cluster file is gone gets.
inline CommandResult run_with_plan_cluster_gone(const std::string& command,
                                                const std::string& plan_file) {
  const std::string text = slurp(plan_file);
  auto plan = nlohmann::json::parse(text);
  plan["cluster"] = "/no/such/dir/cluster.yaml";
  std::ofstream(plan_file) << plan.dump(2);
  CommandResult r = run_hetplan(command + " --plan " + plan_file);
  std::ofstream(plan_file) << text;
  return r;
}

inline std::string source_path(const std::string& rel) {
  return std::string(HETPLAN_SOURCE_DIR) + "/" + rel;
}

}  // namespace hetplan::cli::testing
