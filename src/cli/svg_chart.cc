#include "svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace hetplan::cli {

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += ch;
    }
  }
  return out;
}

double nice_step(double range, int target) {
  if (!(range > 0)) return 1;
  const double raw = range / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

std::string number_text(double v) {
  if (std::abs(v) < 1e-12) v = 0;
  return fmt::format("{:g}", v);
}

std::string line_chart_svg(const LineChart& chart) {
  constexpr double kW = 900, kH = 360, kL = 70, kR = 30, kT = 20, kB = 50, kLegend = 22;
  constexpr const char* kColours[] = {"#2c7fb8", "#d95f0e", "#31a354", "#756bb1", "#e7298a",
                                      "#636363"};
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo, y_lo = x_lo, y_hi = -x_lo;
  for (const auto& s : chart.series)
    for (std::size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i)
      if (std::isfinite(s.x[i]) && std::isfinite(s.y[i])) {
        x_lo = std::min(x_lo, s.x[i]);
        x_hi = std::max(x_hi, s.x[i]);
        y_lo = std::min(y_lo, s.y[i]);
        y_hi = std::max(y_hi, s.y[i]);
      }
  if (!(x_lo <= x_hi))
    return fmt::format("<p class=\"note\">No data for {}.</p>\n", html_escape(chart.label));
  if (chart.y_from_zero) y_lo = std::min(0.0, y_lo);
  const double y_pad = (y_hi - y_lo) * 0.05;
  y_lo -= chart.y_from_zero && y_lo == 0 ? 0 : (y_pad > 0 ? y_pad : std::abs(y_lo) * 0.05 + 1e-9);
  y_hi += y_pad > 0 ? y_pad : std::abs(y_hi) * 0.05 + 1e-9;
  if (x_hi == x_lo) x_hi = x_lo + 1;
  const double legend_h = kLegend * static_cast<double>(chart.series.size());
  const double H = kH + legend_h;
  auto X = [&](double v) { return kL + (v - x_lo) / (x_hi - x_lo) * (kW - kL - kR); };
  auto Y = [&](double v) { return kT + (1 - (v - y_lo) / (y_hi - y_lo)) * (kH - kT - kB); };
  std::string o = fmt::format(
      "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" role=\"img\" aria-label=\"{2}\" font-size=\"12\" "
      "font-family=\"sans-serif\">\n",
      number_text(kW), number_text(H), html_escape(chart.label));
  const double xs = nice_step(x_hi - x_lo, 8);
  for (double v = std::ceil(x_lo / xs) * xs; v <= x_hi * (1 + 1e-12) + 1e-12; v += xs)
    o += fmt::format(
        "<line stroke=\"#ddd\" x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\"/>"
        "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
        X(v), number_text(kT), number_text(kH - kB), number_text(kH - kB + 16), number_text(v));
  const double ys = nice_step(y_hi - y_lo, 6);
  for (double v = std::ceil(y_lo / ys) * ys; v <= y_hi; v += ys)
    o += fmt::format(
        "<line stroke=\"#ddd\" x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\"/>"
        "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>\n",
        number_text(kL), Y(v), number_text(kW - kR), number_text(kL - 6), Y(v) + 4,
        number_text(v));
  o += fmt::format(
      "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#444\"/>"
      "<line x1=\"{0}\" y1=\"{2}\" x2=\"{3}\" y2=\"{2}\" stroke=\"#444\"/>\n"
      "<text x=\"{4}\" y=\"{5}\" text-anchor=\"middle\">{6}</text>\n"
      "<text transform=\"translate(16 {7}) rotate(-90)\" text-anchor=\"middle\">{8}</text>\n",
      number_text(kL), number_text(kT), number_text(kH - kB), number_text(kW - kR),
      number_text((kL + kW - kR) / 2), number_text(kH - 12), html_escape(chart.x_label),
      number_text((kT + kH - kB) / 2), html_escape(chart.y_label));
  for (std::size_t k = 0; k < chart.series.size(); ++k) {
    const auto& s = chart.series[k];
    const char* colour = kColours[k % std::size(kColours)];
    std::string path;
    for (std::size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i)
      if (std::isfinite(s.x[i]) && std::isfinite(s.y[i]))
        path += fmt::format("{}{:.1f} {:.1f}", path.empty() ? "M" : "L", X(s.x[i]), Y(s.y[i]));
    if (!path.empty() && s.line)
      o += fmt::format("<path fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" d=\"{}\"/>\n",
                       colour, path);
    if (s.markers)
      for (std::size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i)
        if (std::isfinite(s.x[i]) && std::isfinite(s.y[i]))
          o += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"{}\"/>\n", X(s.x[i]),
                           Y(s.y[i]), colour);
    const double ly = kH + kLegend * static_cast<double>(k) + 6;
    o += fmt::format(
        "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"{3}\" "
        "stroke-width=\"3\"/><text x=\"{4}\" y=\"{5:.1f}\">{6}</text>\n",
        number_text(kL), ly, number_text(kL + 30), colour, number_text(kL + 38), ly + 4,
        html_escape(s.name));
  }
  o += "</svg>\n";
  return o;
}

}  // namespace hetplan::cli
