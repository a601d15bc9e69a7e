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

std::vector<std::optional<Box>> place_labels(const std::vector<LabelSpot>& spots, const Box& area,
                                             const std::vector<Box>& taken) {
  constexpr double kCharW = 7, kTextH = 14, kGap = 6;
  std::vector<std::optional<Box>> out;
  std::vector<Box> placed = taken;
  for (const auto& s : spots) {
    const double w = kCharW * static_cast<double>(s.text.size()) + 2;
    const Box tries[] = {{s.x + kGap, s.y - kGap - kTextH, w, kTextH},
                         {s.x + kGap, s.y + kGap, w, kTextH},
                         {s.x - kGap - w, s.y - kGap - kTextH, w, kTextH},
                         {s.x - kGap - w, s.y + kGap, w, kTextH}};
    std::optional<Box> at;
    for (const Box& b : tries) {
      const bool inside = b.x >= area.x && b.y >= area.y && b.x + b.w <= area.x + area.w &&
                          b.y + b.h <= area.y + area.h;
      if (inside &&
          std::none_of(placed.begin(), placed.end(), [&](const Box& p) { return p.overlaps(b); })) {
        at = b;
        break;
      }
    }
    if (at) placed.push_back(*at);
    out.push_back(at);
  }
  return out;
}

std::string line_chart_svg(const LineChart& chart) {
  constexpr double kW = 900, kH = 360, kL = 70, kR = 30, kT = 20, kB = 50, kLegend = 22;
  constexpr const char* kColours[] = {"#2c7fb8", "#d95f0e", "#31a354", "#756bb1", "#e7298a",
                                      "#636363"};
  auto finite = [](const ChartSeries& s, std::size_t i) {
    return std::isfinite(s.x[i]) && std::isfinite(s.y[i]);
  };
  auto points = [](const ChartSeries& s) { return std::min(s.x.size(), s.y.size()); };
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo, y_lo = x_lo, y_hi = -x_lo;
  for (const auto& s : chart.series)
    for (std::size_t i = 0; i < points(s); ++i)
      if (finite(s, i)) {
        x_lo = std::min(x_lo, s.x[i]);
        x_hi = std::max(x_hi, s.x[i]);
        y_lo = std::min(y_lo, s.y[i]);
        y_hi = std::max(y_hi, s.y[i]);
      }
  if (!(x_lo <= x_hi))
    return fmt::format("<p class=\"note\">No data for {}.</p>\n", html_escape(chart.label));
  for (const auto& r : chart.rules) {
    y_lo = std::min(y_lo, r.y);
    y_hi = std::max(y_hi, r.y);
  }
  if (chart.y_from_zero) y_lo = std::min(0.0, y_lo);
  const double y_pad = (y_hi - y_lo) * 0.05;
  y_lo -= chart.y_from_zero && y_lo == 0 ? 0 : (y_pad > 0 ? y_pad : std::abs(y_lo) * 0.05 + 1e-9);
  y_hi += y_pad > 0 ? y_pad : std::abs(y_hi) * 0.05 + 1e-9;
  // (A single x value: a margin of its own size's share.)
  const double x_pad =
      (x_hi > x_lo ? x_hi - x_lo : std::max(std::abs(x_lo), 1e-9)) * chart.x_margin;
  x_lo -= x_pad;
  x_hi += x_pad;
  if (x_hi == x_lo) x_hi = x_lo + 1;
  const double legend_h = chart.legend ? kLegend * static_cast<double>(chart.series.size()) : 0;
  const double H = kH + legend_h;
  auto X = [&](double v) { return kL + (v - x_lo) / (x_hi - x_lo) * (kW - kL - kR); };
  auto Y = [&](double v) { return kT + (1 - (v - y_lo) / (y_hi - y_lo)) * (kH - kT - kB); };
  std::string o = fmt::format(
      "<svg class=\"{3}\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" role=\"img\" aria-label=\"{2}\" font-size=\"12\" "
      "font-family=\"sans-serif\">\n",
      number_text(kW), number_text(H), html_escape(chart.label), html_escape(chart.css_class));
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
  std::vector<Box> rule_texts;  // where the rules' texts lie, for the labels to keep clear of
  for (const auto& r : chart.rules) {
    const double w = 7 * static_cast<double>(r.text.size()) + 2;
    rule_texts.push_back({kW - kR - 4 - w, Y(r.y) - 5 - 12, w, 14});
    o += fmt::format(
        "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"{3}\" "
        "stroke-dasharray=\"5 4\"/><text x=\"{4}\" y=\"{5:.1f}\" text-anchor=\"end\" "
        "fill=\"{3}\">{6}</text>\n",
        number_text(kL), Y(r.y), number_text(kW - kR), html_escape(r.colour),
        number_text(kW - kR - 4), Y(r.y) - 5, html_escape(r.text));
  }
  auto colour_of = [&](std::size_t k) {
    const auto& s = chart.series[k];
    return s.colour.empty() ? std::string(kColours[k % std::size(kColours)]) : s.colour;
  };
  // Lines, then dots over them, then labels over both.
  for (std::size_t k = 0; k < chart.series.size(); ++k) {
    const auto& s = chart.series[k];
    std::string path;
    for (std::size_t i = 0; i < points(s); ++i)
      if (finite(s, i)) {
        if (path.empty())
          path = fmt::format("M{:.1f} {:.1f}", X(s.x[i]), Y(s.y[i]));
        else if (s.steps)
          path += fmt::format("H{:.1f}V{:.1f}", X(s.x[i]), Y(s.y[i]));
        else
          path += fmt::format("L{:.1f} {:.1f}", X(s.x[i]), Y(s.y[i]));
      }
    if (!path.empty() && s.line)
      o += fmt::format("<path fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" d=\"{}\"/>\n",
                       colour_of(k), path);
  }
  for (std::size_t k = 0; k < chart.series.size(); ++k) {
    const auto& s = chart.series[k];
    for (std::size_t i = 0; i < points(s) && s.markers; ++i) {
      if (!finite(s, i)) continue;
      const std::string title =
          i < s.titles.size() ? "<title>" + html_escape(s.titles[i]) + "</title>" : "";
      o += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\"{}>{}</circle>\n",
                       X(s.x[i]), Y(s.y[i]), number_text(s.marker_radius), colour_of(k),
                       s.marker_radius > 5 ? " stroke=\"#222\" stroke-width=\"1.5\"" : "", title);
    }
  }
  // Labels, series marked labels_first first.
  std::vector<std::size_t> order(chart.series.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_partition(order.begin(), order.end(),
                        [&](std::size_t k) { return chart.series[k].labels_first; });
  std::vector<LabelSpot> spots;
  std::vector<const ChartSeries*> spot_series;
  for (std::size_t k : order) {
    const auto& s = chart.series[k];
    for (std::size_t i = 0; i < std::min(points(s), s.labels.size()); ++i)
      if (finite(s, i) && !s.labels[i].empty()) {
        spots.push_back({X(s.x[i]), Y(s.y[i]), s.labels[i]});
        spot_series.push_back(&s);
      }
  }
  const auto boxes = place_labels(spots, Box{kL, kT, kW - kL - kR, kH - kT - kB}, rule_texts);
  for (std::size_t i = 0; i < spots.size(); ++i)
    if (boxes[i])
      o += fmt::format("<text class=\"label\" x=\"{:.1f}\" y=\"{:.1f}\"{}>{}</text>\n",
                       boxes[i]->x + 1, boxes[i]->y + boxes[i]->h - 3,
                       spot_series[i]->bold_labels ? " font-weight=\"bold\"" : "",
                       html_escape(spots[i].text));
  for (std::size_t k = 0; k < chart.series.size() && chart.legend; ++k) {
    const double ly = kH + kLegend * static_cast<double>(k) + 6;
    const auto& s = chart.series[k];
    if (s.line || !s.markers)
      o += fmt::format(
          "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"{3}\" "
          "stroke-width=\"3\"/>",
          number_text(kL), ly, number_text(kL + 30), colour_of(k));
    if (s.markers)
      o += fmt::format("<circle cx=\"{}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\"/>",
                       number_text(kL + 15), ly, number_text(std::min(s.marker_radius, 5.0)),
                       colour_of(k));
    o += fmt::format("<text x=\"{}\" y=\"{:.1f}\">{}</text>\n", number_text(kL + 38), ly + 4,
                     html_escape(s.name));
  }
  o += "</svg>\n";
  return o;
}

TimeUnit time_unit(double max_s) {
  if (max_s < 1e-3) return {1e6, "µs"};
  if (max_s < 1) return {1e3, "ms"};
  return {1, "s"};
}

namespace {
constexpr double kTimelineLabelW = 250, kTimelineChartW = 1080, kTimelineRight = 20;
constexpr double kTimelineRowH = 26, kUpperH = 14, kLowerH = 6, kTimelineAxisH = 22;
}  // namespace

TimelineScale timeline_scale(double t0, double t1) {
  if (!(t1 > t0)) t1 = t0 + 1e-6;
  const double px_per_s = kTimelineChartW / (t1 - t0);
  return {kTimelineLabelW - t0 * px_per_s, px_per_s};
}

std::string timeline_svg(const Timeline& t) {
  const double t0 = t.t0, t1 = t.t1 > t.t0 ? t.t1 : t.t0 + 1e-6;
  const TimelineScale scale = timeline_scale(t0, t1);
  const TimeUnit unit = time_unit(t1);
  const double x_lo = kTimelineLabelW, x_hi = kTimelineLabelW + kTimelineChartW;
  const double top = kTimelineAxisH;
  const double rows_h = kTimelineRowH * static_cast<double>(t.rows.size());
  const bool bottom_axis = t.rows.size() > 12;
  const double height = top + rows_h + (bottom_axis ? kTimelineAxisH : 6);
  const double width = kTimelineLabelW + kTimelineChartW + kTimelineRight;
  std::string o = fmt::format(
      "<svg class=\"tl\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" role=\"img\" aria-label=\"{2}\">\n",
      number_text(width), number_text(height), html_escape(t.label));
  // Time axis: grid lines and numbers (above, and below for tall timelines).
  const double step = nice_step((t1 - t0) * unit.scale, 10);
  o += "<g>";
  for (double v = std::ceil(t0 * unit.scale / step - 1e-9) * step;
       v <= t1 * unit.scale * (1 + 1e-9); v += step) {
    const double x = scale.x(v / unit.scale);
    o += fmt::format("<line class=\"grid\" x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\"/>",
                     x, number_text(top - 4), number_text(top + rows_h));
    o += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>", x,
                     number_text(top - 8), number_text(v));
    if (bottom_axis)
      o += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>", x,
                       number_text(top + rows_h + 14), number_text(v));
  }
  o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">time ({})</text>",
                   number_text(kTimelineLabelW - 8), number_text(top - 8), unit.name);
  o += "</g>\n";
  if (t.mark && *t.mark >= t0 && *t.mark <= t1)
    o += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#c0392b\" "
        "stroke-dasharray=\"4 3\"/>\n",
        scale.x(*t.mark), number_text(top - 4), number_text(top + rows_h));

  // Without titles, one path per class, in the order the classes first appear in the row.
  std::vector<std::pair<std::string, std::string>> paths;
  for (std::size_t k = 0; k < t.rows.size(); ++k) {
    const TimelineRow& row = t.rows[k];
    const double y = top + kTimelineRowH * static_cast<double>(k) + 2;
    if (k % 2 == 1)
      o += fmt::format("<rect x=\"0\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#f7f7f9\"/>",
                       number_text(y - 2), number_text(width), number_text(kTimelineRowH));
    o += fmt::format("<text x=\"{}\" y=\"{}\"><title>{}</title>{}</text>\n", number_text(8),
                     number_text(y + 11), html_escape(row.title), html_escape(row.label));
    paths.clear();
    for (int lower = 0; lower < 2; ++lower)
      for (const TimelineBar& b : row.bars) {
        if (b.lower != (lower == 1)) continue;
        const double x0 = std::clamp(scale.x(b.t0), x_lo, x_hi);
        const double x1 = std::clamp(scale.x(b.t1), x_lo, x_hi);
        const double w = std::max(x1 - x0, 1.0);
        const double by = b.lower ? y + kUpperH + 1 : y;
        const double h = b.lower ? kLowerH : kUpperH;
        if (t.titles) {
          o += fmt::format(
              "<rect class=\"{}\" x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\"><title>{}"
              "</title></rect>",
              b.css_class, x0, number_text(by), w, number_text(h), html_escape(b.title));
          continue;
        }
        auto it = std::find_if(paths.begin(), paths.end(),
                               [&](const auto& p) { return p.first == b.css_class; });
        if (it == paths.end()) it = paths.insert(paths.end(), {b.css_class, std::string()});
        it->second +=
            fmt::format("M{:.1f} {}h{:.1f}v{}h-{:.1f}z", x0, number_text(by), w, number_text(h), w);
      }
    for (const auto& [cls, d] : paths) o += fmt::format("<path class=\"{}\" d=\"{}\"/>", cls, d);
    // Texts inside the upper bars wide enough for them.
    for (const TimelineBar& b : row.bars) {
      if (b.lower || b.text.empty()) continue;
      const double x0 = std::clamp(scale.x(b.t0), x_lo, x_hi);
      const double x1 = std::clamp(scale.x(b.t1), x_lo, x_hi);
      if (x1 - x0 < 16) continue;
      o += fmt::format("<text class=\"mb\" x=\"{:.1f}\" y=\"{}\">{}</text>", (x0 + x1) / 2,
                       number_text(y + 10.5), html_escape(b.text));
    }
    o += "\n";
  }
  o += "</svg>\n";
  return o;
}

std::string stacked_bar_svg(const StackedBar& bar) {
  const double scale_max = bar.scale_max > 0 ? bar.scale_max : 1;
  const double kw = bar.width, kh = bar.height;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\">",
      number_text(kw + 4), number_text(kh + 2));
  const double band_w = bar.band / scale_max * kw;
  svg += fmt::format("<rect x=\"0\" y=\"1\" width=\"{:.1f}\" height=\"{}\" fill=\"#f0f0f0\"/>",
                     band_w, number_text(kh));
  double x = 0;
  for (const auto& [cls, value] : bar.parts) {
    const double w = std::max(value, 0.0) / scale_max * kw;
    if (w <= 0) continue;
    svg += fmt::format("<rect class=\"{}\" x=\"{:.1f}\" y=\"1\" width=\"{:.1f}\" height=\"{}\"/>",
                       html_escape(cls), x, w, number_text(kh));
    x += w;
  }
  svg += fmt::format(
      "<line x1=\"{0:.1f}\" y1=\"0\" x2=\"{0:.1f}\" y2=\"{1}\" stroke=\"#222\" "
      "stroke-width=\"2\"/></svg>",
      std::min(band_w, kw + 3), number_text(kh + 2));
  return svg;
}

}  // namespace hetplan::cli
