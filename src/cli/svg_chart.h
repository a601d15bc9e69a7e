// Internal to the command line: what the HTML reports draw with. Escaping of text for HTML, axis
// steps and numbers, and a line chart of several series as inline SVG.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hetplan::cli {

// `s` with & < > " ' escaped for HTML text and attributes.
std::string html_escape(std::string_view s);

// A 1, 2 or 5 times a power of ten, so that `range` holds about `target` steps.
double nice_step(double range, int target);

// A number as the axes print it ("%g", and 0 for what rounds to it).
std::string number_text(double v);

struct ChartSeries {
  std::string name;
  std::vector<double> x, y;  // as many of each; non-finite points are left out
  bool line = true;          // joined by a line (in the order given)
  bool markers = false;      // a dot at each point
};

struct LineChart {
  std::string label;  // what the chart shows, for screen readers
  std::string x_label, y_label;
  std::vector<ChartSeries> series;
  bool y_from_zero = false;  // else the axis spans the data (with a margin)
};

// The chart as an <svg> element: axes with grid lines and numbers, one coloured line per series
// and a legend naming each. A chart without finite points is a note saying so.
std::string line_chart_svg(const LineChart& chart);

}  // namespace hetplan::cli
