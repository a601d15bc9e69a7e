#include "run_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "svg_chart.h"

namespace hetplan::cli {
namespace {

// The q-quantile of `v` (the value at floor((n - 1) q) once sorted); 0 for none.
double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(static_cast<double>(v.size() - 1) * q)];
}

std::string transport_text(const plan::Plan& p, bool ps) {
  if (p.grad_priority == plan::GradPriority::none && p.multipath == plan::Multipath::ecmp && !ps)
    return "Gloo all-reduce in buckets";
  return fmt::format("DLCP chunks ({}): priority {}, loss bound {:g}, multipath {}",
                     ps ? "parameter servers" : "ring all-reduce",
                     plan::to_string(p.grad_priority), p.loss_bound,
                     plan::to_string(p.multipath));
}

constexpr const char* kStyle = R"(<style>
body { font-family: sans-serif; margin: 2em; color: #222; max-width: 980px; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
.note { color: #666; }
</style>
)";

}  // namespace

Result<ComparedRun> read_compared_run(const std::string& file) {
  std::ifstream in(file);
  if (!in) return Error{fmt::format("--compare: {}: cannot read it", file)};
  std::stringstream text;
  text << in.rdbuf();
  const auto j = nlohmann::json::parse(text.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return Error{fmt::format("--compare: {}: expected the JSON object `hetplan run --json` prints",
                             file)};
  ComparedRun r;
  r.name = std::filesystem::path(file).stem().string();
  const auto losses = j.find("losses");
  if (losses == j.end() || !losses->is_array() || losses->empty())
    return Error{fmt::format("--compare: {}: losses: expected an array of numbers", file)};
  for (const auto& v : *losses) {
    if (!v.is_number())
      return Error{fmt::format("--compare: {}: losses: expected an array of numbers", file)};
    r.losses.push_back(v.get<double>());
  }
  if (const auto first = j.find("first_step"); first != j.end()) {
    if (!first->is_number_integer() || first->get<long long>() < 0)
      return Error{fmt::format("--compare: {}: first_step: expected a step number", file)};
    r.first_step = first->get<int>();
  }
  return r;
}

std::string run_report_html(const RunReportInput& in) {
  const auto& r = in.result;
  std::string o = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" +
                  html_escape(in.title) + "</title>\n" + kStyle + "</head><body>\n";
  o += "<h1>" + html_escape(in.title) + "</h1>\n<table>\n";
  auto row = [&](const std::string& k, const std::string& v) {
    o += "<tr><th>" + html_escape(k) + "</th><td>" + html_escape(v) + "</td></tr>\n";
  };
  const std::vector<double> sync(r.sync_times_s.begin() + std::min<std::ptrdiff_t>(
                                                              2, r.sync_times_s.size()),
                                 r.sync_times_s.end());
  const std::vector<double> steps(
      r.step_times_s.begin() + std::min<std::ptrdiff_t>(2, r.step_times_s.size()),
      r.step_times_s.end());
  double dropped = 0, dropped_norm = 0;
  for (const auto& k : r.ranks) dropped += k.grad_dropped_fraction, dropped_norm += k.grad_dropped_norm_fraction;
  const double n = static_cast<double>(std::max<std::size_t>(1, r.ranks.size()));
  row("model", in.model);
  row("ranks", std::to_string(r.ranks.size()));
  row("global batch", std::to_string(in.plan.global_batch));
  row("gradient transport", transport_text(in.plan, in.parameter_servers));
  row("steps", fmt::format("{} (from step {})", r.losses.size(), r.first_step));
  row("step time", fmt::format("median {:.2f} ms, p99 {:.2f} ms (steps after the first two)",
                               1e3 * quantile(steps, 0.5), 1e3 * quantile(steps, 0.99)));
  row("gradient synchronisation (rank 0)",
      fmt::format("median {:.2f} ms, p99 {:.2f} ms per step", 1e3 * quantile(sync, 0.5),
                  1e3 * quantile(sync, 0.99)));
  if (in.plan.loss_bound > 0)
    row("gradients dropped", fmt::format("{:.2f}% of the elements, {:.3f}% of the squared norm "
                                         "(per step, mean over the ranks)",
                                         100 * dropped / n, 100 * dropped_norm / n));
  if (!r.losses.empty()) row("last loss", fmt::format("{:.6f}", r.losses.back()));
  o += "</table>\n<h2>Loss</h2>\n";
  LineChart losses{"loss per step", "step", "loss", {}, false};
  auto curve = [](const std::string& name, int first, const std::vector<double>& v) {
    ChartSeries s{name, {}, v, true, false};
    for (std::size_t i = 0; i < v.size(); ++i) s.x.push_back(first + static_cast<double>(i));
    return s;
  };
  losses.series.push_back(curve("this run", r.first_step, r.losses));
  for (const auto& c : in.compared) losses.series.push_back(curve(c.name, c.first_step, c.losses));
  o += line_chart_svg(losses);
  if (!in.compared.empty()) {
    // Close curves hide each other: the gap, each over its last 10 steps' mean.
    o += "<h3>Gap from the compared runs</h3>\n";
    LineChart gaps{"this run's loss against each compared run's", "step",
                   "(this - other) / other, % (means of 10 steps)", {}, false};
    auto trailing = [](const std::vector<double>& v, std::size_t i) {
      const std::size_t lo = i + 1 >= 10 ? i + 1 - 10 : 0;
      double sum = 0;
      for (std::size_t k = lo; k <= i; ++k) sum += v[k];
      return sum / static_cast<double>(i + 1 - lo);
    };
    for (const auto& c : in.compared) {
      ChartSeries g{"against " + c.name, {}, {}, true, false};
      for (std::size_t i = 0; i < r.losses.size(); ++i) {
        const long long k = static_cast<long long>(r.first_step) + static_cast<long long>(i) -
                            c.first_step;  // the other run's index of the same step
        if (k < 0 || k >= static_cast<long long>(c.losses.size())) continue;
        const double other = trailing(c.losses, static_cast<std::size_t>(k));
        g.x.push_back(static_cast<double>(r.first_step) + static_cast<double>(i));
        g.y.push_back(100 * (trailing(r.losses, i) - other) / other);
      }
      gaps.series.push_back(std::move(g));
    }
    o += line_chart_svg(gaps);
    o += "<table><tr><th>run</th><th>steps</th><th>last loss</th><th>mean of the last 10</th>"
         "</tr>\n";
    auto tail_mean = [](const std::vector<double>& v) {
      const std::size_t k = std::min<std::size_t>(10, v.size());
      double s = 0;
      for (std::size_t i = v.size() - k; i < v.size(); ++i) s += v[i];
      return k ? s / static_cast<double>(k) : 0.0;
    };
    auto line = [&](const std::string& name, const std::vector<double>& v) {
      o += fmt::format("<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{:.6f}</td>"
                       "<td class=\"n\">{:.6f}</td></tr>\n",
                       html_escape(name), v.size(), v.empty() ? 0.0 : v.back(), tail_mean(v));
    };
    line("this run", r.losses);
    for (const auto& c : in.compared) line(c.name, c.losses);
    o += "</table>\n";
  }
  o += "<h2>Gradient synchronisation per step (rank 0)</h2>\n";
  LineChart sync_chart{"gradient synchronisation time per step", "step", "milliseconds", {}, true};
  std::vector<double> ms;
  for (double s : r.sync_times_s) ms.push_back(1e3 * s);
  sync_chart.series.push_back(curve("gradient synchronisation", r.first_step, ms));
  std::vector<double> step_ms;
  for (double s : r.step_times_s) step_ms.push_back(1e3 * s);
  sync_chart.series.push_back(curve("whole step", r.first_step, step_ms));
  o += line_chart_svg(sync_chart);
  o += "<h2>Ranks</h2>\n<table><tr><th>rank</th><th>compute (s)</th><th>comm (s)</th>"
       "<th>idle (s)</th><th>step peak (MiB)</th><th>dropped elements</th></tr>\n";
  for (std::size_t i = 0; i < r.ranks.size(); ++i) {
    const auto& k = r.ranks[i];
    o += fmt::format(
        "<tr><td class=\"n\">{}</td><td class=\"n\">{:.4f}</td><td class=\"n\">{:.4f}</td>"
        "<td class=\"n\">{:.4f}</td><td class=\"n\">{:.2f}</td><td class=\"n\">{:.2f}%</td></tr>\n",
        i, k.compute_s, k.comm_s, k.idle_s, k.step_peak_bytes / (1024.0 * 1024.0),
        100 * k.grad_dropped_fraction);
  }
  o += "</table>\n<p class=\"note\">Times over the steps after the first two; compute is the rest "
       "of each step after communication and waiting.</p>\n</body></html>\n";
  return o;
}

}  // namespace hetplan::cli
