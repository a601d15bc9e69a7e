// The plotting layer's timeline and stacked bar (src/cli/svg_chart.h): exact pixel positions on
// small hand-made charts, clipping to the window, the path form without titles, texts only in
// bars wide enough for them, and escaping.
#include <gtest/gtest.h>

#include <string>

#include "../../src/cli/svg_chart.h"
#include "text_search.h"

namespace hetplan::cli {
namespace {

using testing::contains;
using testing::count;

TEST(TimeUnit, ChosenByTheLargestTimeShown) {
  EXPECT_STREQ(time_unit(5e-4).name, "µs");
  EXPECT_EQ(time_unit(5e-4).scale, 1e6);
  EXPECT_STREQ(time_unit(0.5).name, "ms");
  EXPECT_STREQ(time_unit(2).name, "s");
}

TEST(TimelineScale, MapsTheWindowOntoTheChartsWidth) {
  // 250 px of labels, then 1080 px for the window.
  const TimelineScale s = timeline_scale(1, 3);
  EXPECT_DOUBLE_EQ(s.px_per_s, 540);
  EXPECT_DOUBLE_EQ(s.x(1), 250);
  EXPECT_DOUBLE_EQ(s.x(3), 1330);
}

Timeline two_rows() {
  Timeline t;
  t.label = "a <window>";
  t.t0 = 0;
  t.t1 = 2;  // 540 px per second from x = 250
  t.mark = 1.5;
  t.rows.push_back({"row & 0", "lanes 0 and 1", {}});
  t.rows[0].bars.push_back({0, 0.5, false, "f", "forward 0", "0"});
  t.rows[0].bars.push_back({0.5, 0.51, false, "b", "backward 0", "0"});  // 5.4 px: no text
  t.rows[0].bars.push_back({1, 1.5, true, "g", "sync", ""});
  t.rows.push_back({"row 1", "", {}});
  t.rows[1].bars.push_back({-1, 3, false, "o", "long", "7"});  // clipped to the window
  return t;
}

TEST(TimelineSvg, DrawsEveryBarWhereItsTimesAre) {
  const std::string svg = timeline_svg(two_rows());
  EXPECT_EQ(svg.rfind("<svg class=\"tl\"", 0), 0u);
  EXPECT_TRUE(contains(svg, "aria-label=\"a &lt;window&gt;\""));
  // Width 250 + 1080 + 20; height: axis 22 + 2 rows of 26 + 6.
  EXPECT_TRUE(contains(svg, "width=\"1350\" height=\"80\""));
  // Upper bars 14 px tall at the row's top + 2, lower ones 6 px tall 15 px below that.
  EXPECT_TRUE(contains(svg,
                       "<rect class=\"f\" x=\"250.0\" y=\"24\" width=\"270.0\" height=\"14\">"
                       "<title>forward 0</title></rect>"));
  EXPECT_TRUE(contains(svg, "<rect class=\"b\" x=\"520.0\" y=\"24\" width=\"5.4\" height=\"14\">"));
  EXPECT_TRUE(
      contains(svg, "<rect class=\"g\" x=\"790.0\" y=\"39\" width=\"270.0\" height=\"6\">"));
  // Clipped to the window: from 250 to 1330 px.
  EXPECT_TRUE(
      contains(svg, "<rect class=\"o\" x=\"250.0\" y=\"50\" width=\"1080.0\" height=\"14\">"));
  // Texts in the middle of bars at least 16 px wide only.
  EXPECT_TRUE(contains(svg, "<text class=\"mb\" x=\"385.0\" y=\"34.5\">0</text>"));
  EXPECT_TRUE(contains(svg, "<text class=\"mb\" x=\"790.0\" y=\"60.5\">7</text>"));
  EXPECT_EQ(count(svg, "class=\"mb\""), 2u);
  // Labels escaped, with their hover titles; the second row striped; the mark at 1.5 s.
  EXPECT_TRUE(contains(svg, "<title>lanes 0 and 1</title>row &amp; 0</text>"));
  EXPECT_EQ(count(svg, "fill=\"#f7f7f9\""), 1u);
  EXPECT_TRUE(contains(svg,
                       "<line x1=\"1060.0\" y1=\"18\" x2=\"1060.0\" y2=\"74\" "
                       "stroke=\"#c0392b\""));
  // The axis in seconds, a grid line and a number every 0.2 s from 0 to 2.
  EXPECT_TRUE(contains(svg, ">time (s)</text>"));
  EXPECT_EQ(count(svg, "<line class=\"grid\""), 11u);
}

TEST(TimelineSvg, WithoutTitlesOnePathPerClassAndRow) {
  Timeline t = two_rows();
  t.titles = false;
  t.rows[0].bars.push_back({1.6, 1.7, false, "f", "", ""});
  const std::string svg = timeline_svg(t);
  EXPECT_EQ(count(svg, "<rect class="), 0u);
  EXPECT_EQ(count(svg, "<title>forward"), 0u);
  // Row 0: f (two bars), b, g; row 1: o.
  EXPECT_EQ(count(svg, "<path class="), 4u);
  EXPECT_TRUE(contains(
      svg, "<path class=\"f\" d=\"M250.0 24h270.0v14h-270.0zM1114.0 24h54.0v14h-54.0z\"/>"));
}

TEST(TimelineSvg, AMarkOutsideTheWindowIsLeftOutAndTallTimelinesHaveASecondAxis) {
  Timeline t = two_rows();
  t.mark = 5;
  for (int k = 0; k < 12; ++k) t.rows.push_back({"more", "", {}});
  const std::string svg = timeline_svg(t);
  EXPECT_FALSE(contains(svg, "stroke=\"#c0392b\""));
  // 14 rows: the numbers below the rows too (11 grid lines, 22 numbers, one axis title).
  EXPECT_EQ(count(svg, "text-anchor=\"middle\""), 22u);
}

TEST(StackedBarSvg, PartsEndToEndOverTheBandWithATickAtIt) {
  StackedBar bar;
  bar.parts = {{"mp", 10}, {"mg", 0}, {"ma", 30}};
  bar.band = 50;
  bar.scale_max = 100;
  bar.width = 200;
  const std::string svg = stacked_bar_svg(bar);
  EXPECT_TRUE(contains(svg, "width=\"204\" height=\"16\""));
  EXPECT_TRUE(
      contains(svg, "<rect x=\"0\" y=\"1\" width=\"100.0\" height=\"14\" fill=\"#f0f0f0\"/>"));
  EXPECT_TRUE(contains(svg, "<rect class=\"mp\" x=\"0.0\" y=\"1\" width=\"20.0\" height=\"14\"/>"));
  EXPECT_FALSE(contains(svg, "class=\"mg\""));  // nothing to draw
  EXPECT_TRUE(
      contains(svg, "<rect class=\"ma\" x=\"20.0\" y=\"1\" width=\"60.0\" height=\"14\"/>"));
  EXPECT_TRUE(contains(svg, "<line x1=\"100.0\" y1=\"0\" x2=\"100.0\" y2=\"16\""));
  // A band past the bar's width: the tick stays inside the picture.
  bar.band = 200;
  EXPECT_TRUE(contains(stacked_bar_svg(bar), "<line x1=\"203.0\""));
}

}  // namespace
}  // namespace hetplan::cli
