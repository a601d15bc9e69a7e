#include "hetplan/cli/app.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <vector>

#include "commands.h"
#include "hetplan/core/bounded_text.h"
#include "hetplan/core/error.h"
#include "hetplan/core/json_util.h"
#include "onnx_flags.h"

namespace hetplan::cli {

int report_error(const std::string& message) {
  // One printable line however long or odd the input it quotes.
  std::fprintf(stderr, "hetplan: error: %s\n", bounded_message(message).c_str());
  return 2;
}

namespace {
std::vector<std::string>& command_line() {
  static std::vector<std::string> args;
  return args;
}
}  // namespace

std::string exec_runtime_binary() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path full = self.parent_path() / "hetplan-runtime";
  if (ec || command_line().empty() || access(full.c_str(), X_OK) != 0)
    return "this hetplan was built without the runtime (configure with "
           "-DHETPLAN_WITH_RUNTIME=ON and libtorch installed)";
  std::vector<char*> argv;
  std::string arg0 = full.string();
  argv.push_back(arg0.data());
  for (std::size_t i = 1; i < command_line().size(); ++i) argv.push_back(command_line()[i].data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  execv(full.c_str(), argv.data());
  return fmt::format("could not start {}: {}", full.string(), std::strerror(errno));
}

int report_no_runtime(const std::string& command) {
  return report_error(command + ": " + exec_runtime_binary());
}

bool write_output_file(const std::string& file, const std::string& text) {
  try {
    write_text_file_atomic(file, text);
    return true;
  } catch (const std::exception& e) {
    report_error(e.what());
    return false;
  }
}

std::string writable_output(const std::string& file) {
  namespace fs = std::filesystem;
  if (file.empty()) return "";
  const fs::path path(file);
  std::error_code ec;
  if (fs::is_directory(path, ec)) return fmt::format("{}: is a directory (expected a file)", file);
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec))
    return fmt::format("{}: cannot write: no directory {}", file, dir.string());
  // The file is written beside itself and renamed into place (write_text_file_atomic).
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return fmt::format("{}: cannot write: directory {} is not writable", file, dir.string());
  return "";
}

int run_main(int argc, char** argv) {
  command_line().assign(argv, argv + argc);
  if (command_line().size() > 1) {
    std::vector<std::string> rest(command_line().begin() + 1, command_line().end());
    if (std::string bad = fold_onnx_flags(rest); !bad.empty()) return report_error(bad);
    command_line().resize(1);
    command_line().insert(command_line().end(), rest.begin(), rest.end());
  }
  std::vector<char*> args;
  for (std::string& a : command_line()) args.push_back(a.data());
  argc = static_cast<int>(args.size());
  argv = args.data();
  CLI::App app{"hetplan: plan, simulate and run deep-learning training on clusters of unlike GPUs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "hetplan 0.1.0");
  std::map<CLI::App*, Action> actions;
  auto add = [&](Action (*reg)(CLI::App&)) {
    const std::size_t before = app.get_subcommands([](CLI::App*) { return true; }).size();
    Action a = reg(app);
    auto subs = app.get_subcommands([](CLI::App*) { return true; });
    if (subs.size() > before) actions[subs.back()] = std::move(a);
  };
  add(add_plan_command);
  add(add_replan_command);
  add(add_pareto_command);
  add(add_simulate_command);
  add(add_run_command);
  add(add_calibrate_command);
  add(add_models_command);
  add(add_devices_command);
  add(add_clusters_command);
  add(add_check_cluster_command);
  add(add_groups_command);
  add(add_validate_command);
  add(add_export_command);
  add(add_train_policy_command);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    return report_error(what + " (run 'hetplan --help' for usage)");
  }
  try {
    for (auto& [sub, action] : actions)
      if (sub->parsed()) return action();
  } catch (const std::exception& e) {
    // Library code reports user errors as values; anything reaching here is still shown as one
    // line rather than a crash.
    return report_error(fmt::format("internal error: {}", e.what()));
  }
  return report_error("no command given (run 'hetplan --help')");
}

}  // namespace hetplan::cli
