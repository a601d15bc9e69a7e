// Internal to the command line: what the HTML reports draw with. Escaping of text for HTML, axis
// steps and numbers, a line chart of several series, a timeline of rows of bars and a stacked bar,
// as inline SVG.
#pragma once

#include <optional>
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
  bool steps = false;        // the line as a staircase: level to the next point's x, then to it
  double marker_radius = 4;
  std::string colour{};  // empty: the chart's palette, by the series' place
  std::vector<std::string>
      labels{};  // per point, written beside it (empty: none; see place_labels)
  std::vector<std::string> titles{};  // per point, shown on hover (empty: none)
  bool bold_labels = false;
  bool labels_first = false;  // its labels are placed before other series' (drawn in order)
};

// A dashed horizontal line across the plot at `y`, with `text` at its right end.
struct ChartRule {
  double y = 0;
  std::string text;
  std::string colour = "#c0392b";
};

struct LineChart {
  std::string label;  // what the chart shows, for screen readers
  std::string x_label, y_label;
  std::vector<ChartSeries> series;
  bool y_from_zero = false;  // else the axis spans the data (with a margin)
  std::vector<ChartRule> rules{};
  double x_margin = 0;  // share of the x range left free on each side
  bool legend = true;   // a line naming each series below the plot
  std::string css_class = "chart";
};

// A rectangle in the chart's pixels: left, top, width, height.
struct Box {
  double x = 0, y = 0, w = 0, h = 0;
  bool overlaps(const Box& o) const {
    return x < o.x + o.w && o.x < x + w && y < o.y + o.h && o.y < y + h;
  }
};

// A point's label to place: the point's pixel position and the text.
struct LabelSpot {
  double x = 0, y = 0;
  std::string text;
};

// Where each label goes, in the order given: the first of beside its point to the upper right,
// lower right, upper left and lower left whose box (12 px text, about 7 px a character) lies inside
// `area` and clear of `taken` and of the labels placed before it; none where no spot is clear (the
// point then says what it is only on hover). Earlier labels win: give the ones that matter most
// first.
std::vector<std::optional<Box>> place_labels(const std::vector<LabelSpot>& spots, const Box& area,
                                             const std::vector<Box>& taken = {});

// The chart as an <svg> element: axes with grid lines and numbers, one coloured line (or staircase,
// or dots) per series, labels beside points that do not overlap (place_labels, series by series),
// rules, and a legend naming each series. Labels of series marked labels_first are placed first. A
// chart without finite points is a note saying so.
std::string line_chart_svg(const LineChart& chart);

// The unit a time axis is written in, chosen by the largest time shown: µs, ms or s.
struct TimeUnit {
  double scale;  // units per second
  const char* name;
};
TimeUnit time_unit(double max_s);

// A timeline (a Gantt chart): rows of bars over a window [t0, t1] of seconds, a time axis above
// (and below when there are more than 12 rows), rows striped. A row's bars lie in two tracks: a
// tall upper one and a thin lower one.
struct TimelineBar {
  double t0 = 0, t1 = 0;  // seconds; drawn clipped to the window and at least a pixel wide
  bool lower = false;     // in the thin lower track
  std::string css_class;
  std::string title{};  // shown on hover (when the timeline has titles)
  std::string text{};   // written inside the bar when it is at least 16 px wide
};

struct TimelineRow {
  std::string label;
  std::string title{};  // the label's hover text
  std::vector<TimelineBar> bars;
};

struct Timeline {
  std::string label;  // what it shows, for screen readers
  double t0 = 0, t1 = 0;
  std::vector<TimelineRow> rows;
  std::optional<double> mark{};  // a dashed red line across the rows at this time
  // One <rect> per bar, with its title; false: one <path> per CSS class and row and no titles
  // (half the bytes, for timelines of many bars).
  bool titles = true;
};

// Where timeline_svg draws time t of a window [t0, t1]: x = x_of_zero + t * px_per_s. Callers
// merge bars narrower than a pixel at this scale.
struct TimelineScale {
  double x_of_zero = 0, px_per_s = 1;
  double x(double t) const { return x_of_zero + t * px_per_s; }
};
TimelineScale timeline_scale(double t0, double t1);

// The timeline as an <svg class="tl"> element.
std::string timeline_svg(const Timeline& t);

// One horizontal bar of parts laid end to end (a device's memory by kind), over a grey band as
// long as `band` and with a dark tick at it (its capacity), all on a scale where `scale_max` is the
// bar's full width of `width` px.
struct StackedBar {
  std::vector<std::pair<std::string, double>> parts;  // CSS class, value (<= 0: left out)
  double band = 0;
  double scale_max = 1;
  double width = 280, height = 14;
};
std::string stacked_bar_svg(const StackedBar& bar);

}  // namespace hetplan::cli
