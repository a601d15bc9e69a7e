// Internal to the command line: one function per subcommand, registered on the CLI11 app.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

namespace hetplan::cli {

// Each subcommand registers its options and returns the action to run when it was chosen.
// Actions return the process exit code; user errors are reported through report_error.
using Action = std::function<int()>;

Action add_simulate_command(CLI::App& app);
Action add_models_command(CLI::App& app);
Action add_devices_command(CLI::App& app);
Action add_clusters_command(CLI::App& app);
Action add_check_cluster_command(CLI::App& app);
Action add_plan_command(CLI::App& app);
Action add_replan_command(CLI::App& app);
Action add_pareto_command(CLI::App& app);
Action add_run_command(CLI::App& app);
Action add_calibrate_command(CLI::App& app);
Action add_groups_command(CLI::App& app);
Action add_validate_command(CLI::App& app);
Action add_export_command(CLI::App& app);
Action add_train_policy_command(CLI::App& app);

// Prints "hetplan: error: <message>" on stderr and returns the exit code for user errors (2).
int report_error(const std::string& message);

// For a command that needs libtorch (the runtime, the learned policy) in a hetplan built without
// it: replaces this process by hetplan-runtime beside this executable (the same command line,
// built with libtorch). Returns only when it could not: with why, for report_error.
std::string exec_runtime_binary();

// Reports that `command` needs the runtime: runs it in hetplan-runtime where that exists beside
// this executable, else reports the error and returns the exit code.
int report_no_runtime(const std::string& command);

// Writes text to a file atomically, or reports why it could not (returns false).
bool write_output_file(const std::string& file, const std::string& text);

// A CLI11 check for an output file's option, run before any work: "" when `file` can be written
// (its directory exists and is writable, and it is not a directory), else why not, naming it. An
// output that cannot be written is found at once, not after a long search or measurement.
std::string writable_output(const std::string& file);

}  // namespace hetplan::cli
