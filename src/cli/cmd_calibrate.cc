// hetplan calibrate: time the cost model's op kinds on this machine and write a calibration
// profile that simulate, plan and pareto read with --calibration.
#include <fmt/format.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "commands.h"
#include "hetplan/cluster/device_type.h"
#include "hetplan/cost/compute_cost.h"
#ifdef HETPLAN_WITH_RUNTIME
#include "hetplan/runtime/calibrate.h"
#endif

namespace hetplan::cli {
namespace {

struct CalibrateArgs {
  std::string device = "cpu";
  std::string device_type;
  std::string out;
  int threads = 1;
  int sizes = 7;
  double seconds_per_point = 0.1;
  bool no_messaging = false;
  std::string messaging_worker;  // set on the workers calibrate starts: where rank 0 writes
};

#ifdef HETPLAN_WITH_RUNTIME
std::string today() {
  const std::time_t t = std::time(nullptr);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&t));
  return buf;
}
#endif

int run_calibrate(const CalibrateArgs& a) {
#ifdef HETPLAN_WITH_RUNTIME
  if (!a.messaging_worker.empty()) {
    auto done = runtime::messaging_worker(a.messaging_worker);
    return done ? 0 : report_error(done.error().message);
  }
  if (a.out.empty()) return report_error("--out: expected the profile to write (JSON)");
  if (a.device != "cpu" && a.device != "cuda")
    return report_error(fmt::format("--device: expected cpu or cuda, got \"{}\"", a.device));
  runtime::CalibrateOptions o;
  o.device = a.device;
  o.device_type = a.device_type.empty() ? (a.device == "cpu" ? "cpu" : "") : a.device_type;
  if (o.device_type.empty())
    return report_error(
        "--device-type: expected the catalog name of this GPU (e.g. H100-SXM5-80GB)");
  if (!cluster::find_device_type(o.device_type))
    return report_error(
        fmt::format("--device-type: \"{}\" is not in the device catalog (hetplan devices lists it)",
                    o.device_type));
  if (a.seconds_per_point <= 0 || a.seconds_per_point > 10)
    return report_error("--seconds-per-point: expected a number in (0, 10]");
  o.threads = a.threads;
  o.sizes = a.sizes;
  o.seconds_per_point = a.seconds_per_point;
  o.measured_on = today();
  const bool tty = isatty(fileno(stderr));
  auto prof = runtime::calibrate(o, [tty](const std::string& line) {
    if (tty) std::fprintf(stderr, "hetplan: %s\n", line.c_str());
  });
  if (!prof) return report_error(prof.error().message);
  // Workers of this host talk over loopback (hetplan run --nprocs): time that too.
  if (a.device == "cpu" && !a.no_messaging) {
    if (tty) std::fprintf(stderr, "hetplan: all-reduces between two workers\n");
    // In a directory of its own (mkdtemp), which the workers write into.
    std::string dir =
        (std::filesystem::temp_directory_path() / "hetplan_messaging_XXXXXX").string();
    if (::mkdtemp(dir.data()) == nullptr)
      return report_error(fmt::format("cannot make a temporary directory in {}",
                                      std::filesystem::temp_directory_path().string()));
    const std::string file = dir + "/points.json";
    auto pts = runtime::calibrate_messaging({"calibrate", "--messaging-worker", file}, file);
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    if (pts)
      prof->messaging[o.device_type] = std::move(*pts);
    else  // the op points took minutes: keep them
      std::fprintf(stderr,
                   "hetplan: warning: %s; the profile has no messaging points (--no-messaging "
                   "skips this step)\n",
                   pts.error().message.c_str());
  }
  if (!write_output_file(a.out, cost::calibration_profile_to_json(*prof))) return 2;
  std::size_t points = 0;
  for (const auto& [dev, kinds] : prof->points)
    for (const auto& [kind, pts] : kinds) points += pts.size();
  fmt::print("wrote {} ({} points for {} on {}, optimizer steps{})\n", a.out, points, o.device_type,
             a.device, prof->messaging.empty() ? "" : ", and all-reduces between two workers");
  return 0;
#else
  (void)a;
  return report_no_runtime("calibrate");
#endif
}

}  // namespace

Action add_calibrate_command(CLI::App& app) {
  auto args = std::make_shared<CalibrateArgs>();
  auto* cmd = app.add_subcommand(
      "calibrate",
      "Time the cost model's op kinds on this machine and write a calibration profile");
  cmd->add_option("--device", args->device, "cpu or cuda")->capture_default_str();
  cmd->add_option("--device-type", args->device_type,
                  "Catalog name to file the points under (default for cpu: cpu)");
  cmd->add_option("--out,-o", args->out, "The profile to write (JSON; required)")
      ->check(writable_output);
  cmd->add_option("--threads", args->threads, "Intra-op threads, as each run worker uses")
      ->capture_default_str();
  cmd->add_option("--sizes", args->sizes, "Sizes per op kind (2 to 10)")->capture_default_str();
  cmd->add_option("--seconds-per-point", args->seconds_per_point,
                  "Repeat each measurement for at least this long")
      ->capture_default_str();
  cmd->add_flag("--no-messaging", args->no_messaging,
                "On cpu, skip timing all-reduces between two worker processes");
  // How calibrate starts its two messaging workers; not for users.
  cmd->add_option("--messaging-worker", args->messaging_worker)->group("");
  return [args] { return run_calibrate(*args); };
}

}  // namespace hetplan::cli
