// The run report (hetplan run --report) and the line charts it draws: exact sections and values
// on a small hand-made run, escaping, compared runs read from run --json files, and their errors.
#include "../../src/cli/run_report.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "../../src/cli/svg_chart.h"
#include "text_search.h"

namespace hetplan::cli {
namespace {

using testing::count;

TEST(LineChart, OnePathAndOneLegendEntryPerSeries) {
  LineChart c{"loss <per> step", "step", "loss", {}, false};
  c.series.push_back({"a & b", {0, 1, 2}, {3, 2, 1}, true, false});
  c.series.push_back({"c", {0, 1}, {2.5, std::nan("")}, true, false});  // the NaN is left out
  const std::string svg = line_chart_svg(c);
  EXPECT_EQ(count(svg, "<path "), 2u);
  EXPECT_NE(svg.find("d=\"M"), std::string::npos);
  EXPECT_NE(svg.find(">a &amp; b</text>"), std::string::npos);
  EXPECT_NE(svg.find("aria-label=\"loss &lt;per&gt; step\""), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  // Nothing finite: a note, no SVG.
  LineChart empty{"nothing", "x", "y", {{"s", {0}, {std::nan("")}, true, false}}, false};
  EXPECT_EQ(line_chart_svg(empty).rfind("<p class=\"note\">No data for nothing.</p>", 0), 0u);
}

TEST(LineChart, MarkersWithoutALine) {
  LineChart c{"points", "x", "y", {}, false};
  c.series.push_back({"dots", {0, 1, 2}, {3, std::nan(""), 1}, false, true});
  const std::string svg = line_chart_svg(c);
  EXPECT_EQ(count(svg, "<path "), 0u);
  EXPECT_EQ(count(svg, "<circle "), 3u);  // the NaN is left out; one in the legend
}

TEST(LineChart, StaircaseRulesAndLabelsThatDoNotOverlap) {
  LineChart c{"frontier", "time", "memory", {}, true};
  ChartSeries s{"front", {}, {}, true, true};
  s.steps = true;
  for (int i = 0; i < 40; ++i) {  // points closer together than their labels are wide
    s.x.push_back(1 + 0.001 * i);
    s.y.push_back(10 - 0.01 * i);
    s.labels.push_back(std::to_string(i + 1));
    s.titles.push_back("plan " + std::to_string(i + 1));
  }
  s.x.push_back(3);  // far away: the others crowd into a 20th of the width
  s.y.push_back(1);
  s.labels.push_back("41");
  s.titles.push_back("plan 41");
  c.series.push_back(s);
  c.rules.push_back({12, "capacity"});
  const std::string svg = line_chart_svg(c);
  const std::size_t d = svg.find("d=\"M");
  ASSERT_NE(d, std::string::npos);
  const std::string path = svg.substr(d + 3, svg.find('"', d + 3) - (d + 3));
  EXPECT_EQ(count(path, "H"), 40u) << path;  // level to each next point, then down to it
  EXPECT_EQ(count(path, "L"), 0u) << path;
  EXPECT_EQ(count(svg, "<circle "), 42u);      // and one in the legend
  EXPECT_EQ(count(svg, "<title>plan "), 41u);  // every point says what it is on hover
  EXPECT_NE(svg.find(">capacity</text>"), std::string::npos);
  const std::size_t labels = count(svg, "class=\"label\"");
  EXPECT_GE(labels, 2u);
  EXPECT_LT(labels, 20u);
}

TEST(LineChart, LabelsArePlacedClearOfEachOtherEarlierFirst) {
  const Box area{0, 0, 200, 100};
  // Two points at one spot: the second label goes below the first; a third and fourth to the
  // left; a fifth finds no clear spot. A point at the right edge puts its label on its left.
  std::vector<LabelSpot> spots(5, LabelSpot{100, 50, "12"});
  spots.push_back({199, 50, "edge"});
  const auto boxes = place_labels(spots, area);
  ASSERT_EQ(boxes.size(), 6u);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(boxes[i]) << i;
  for (int i = 0; i < 4; ++i)
    for (int j = i + 1; j < 4; ++j) EXPECT_FALSE(boxes[i]->overlaps(*boxes[j])) << i << " " << j;
  EXPECT_GT(boxes[0]->x, 100);
  EXPECT_LT(boxes[0]->y, 50);
  EXPECT_GT(boxes[1]->y, 50);
  EXPECT_LT(boxes[2]->x + boxes[2]->w, 100);
  EXPECT_FALSE(boxes[4]);
  ASSERT_TRUE(boxes[5]);
  EXPECT_LE(boxes[5]->x + boxes[5]->w, 199);
}

TEST(LineChart, TakenPlacesAndASinglePoint) {
  // A label keeps clear of what is taken (a rule's text): here its upper-right spot.
  const auto boxes = place_labels({{100, 50, "7"}}, Box{0, 0, 200, 100}, {Box{100, 20, 50, 25}});
  ASSERT_TRUE(boxes[0]);
  EXPECT_GT(boxes[0]->y, 50);
  // One point: the x axis still has a margin around it, so it is not drawn on the y axis (x 70).
  LineChart c{"one", "x", "y", {{"p", {5}, {1}, false, true}}, false};
  c.x_margin = 0.08;
  const std::string svg = line_chart_svg(c);
  const std::size_t at = svg.find("<circle cx=\"");
  ASSERT_NE(at, std::string::npos);
  EXPECT_GT(std::stod(svg.substr(at + 12)), 100);
}

TEST(LineChart, AxisStepsAreOneTwoOrFiveTimesAPowerOfTen) {
  EXPECT_DOUBLE_EQ(nice_step(10, 5), 2);
  EXPECT_DOUBLE_EQ(nice_step(0.7, 6), 0.2);
  EXPECT_DOUBLE_EQ(nice_step(300, 8), 50);
  EXPECT_EQ(number_text(1e-15), "0");
  EXPECT_EQ(number_text(2.5), "2.5");
}

TEST(RunReport, SectionsFiguresAndComparedRuns) {
  plan::Plan p;
  p.global_batch = 16;
  p.grad_priority = plan::GradPriority::layer_magnitude;
  p.loss_bound = 0.05;
  runtime::RunResult r;
  r.losses = {2.0, 1.5, 1.25, 1.0};
  r.step_times_s = {0.5, 0.2, 0.1, 0.3};
  r.sync_times_s = {0.4, 0.1, 0.05, 0.2};  // after the first two: 0.05 and 0.2
  r.ranks = {runtime::RankTimes{1, 2, 0, 1048576, 0.04, 0.01, 0, 0},
             runtime::RankTimes{1, 2, 0, 1048576, 0.02, 0.03, 1, 1}};
  const RunReportInput in{"hetplan run: <gpt>", "gpt:layers=2", p, r,
                          {ComparedRun{"lossless", 0, {2.0, 1.4, 1.2, 0.9}}}};
  const std::string html = run_report_html(in);
  EXPECT_NE(html.find("<title>hetplan run: &lt;gpt&gt;</title>"), std::string::npos);
  EXPECT_NE(html.find("DLCP chunks (ring all-reduce): priority layer+magnitude, loss bound 0.05, "
                      "multipath ecmp"),
            std::string::npos);
  EXPECT_NE(html.find("median 50.00 ms, p99 50.00 ms per step"), std::string::npos) << html;
  EXPECT_NE(html.find("median 100.00 ms, p99 100.00 ms (steps after"), std::string::npos);
  // Dropped: the ranks' mean, 3% of the elements and 2% of the squared norm.
  EXPECT_NE(html.find("3.00% of the elements, 2.000% of the squared norm"), std::string::npos);
  EXPECT_EQ(count(html, "<svg "), 3u);  // the losses, their gap, the synchronisation times
  EXPECT_NE(html.find(">against lossless</text>"), std::string::npos);
  EXPECT_NE(html.find(">this run</text>"), std::string::npos);
  EXPECT_NE(html.find(">lossless</text>"), std::string::npos);
  // The comparison table: last loss and the mean of the last (up to) 10.
  EXPECT_NE(html.find("<td>lossless</td><td class=\"n\">4</td><td class=\"n\">0.900000</td>"
                      "<td class=\"n\">1.375000</td>"),
            std::string::npos);
}

TEST(RunReport, ComparedRunsAreReadFromRunJsonOrRefusedWithTheField) {
  const auto dir = std::filesystem::temp_directory_path();
  const auto good = dir / ("hetplan_cmp_" + std::to_string(::getpid()) + ".json");
  std::ofstream(good) << R"({"first_step": 3, "losses": [1.5, 1.25]})";
  auto run = read_compared_run(good.string());
  ASSERT_TRUE(run) << run.error().message;
  EXPECT_EQ(run->name, good.stem().string());
  EXPECT_EQ(run->first_step, 3);
  EXPECT_EQ(run->losses, (std::vector<double>{1.5, 1.25}));
  std::ofstream(good) << R"({"losses": [1.5, "x"]})";
  auto bad = read_compared_run(good.string());
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message,
            "--compare: " + good.string() + ": losses: expected an array of numbers");
  std::ofstream(good) << "not json";
  bad = read_compared_run(good.string());
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("expected the JSON object"), std::string::npos);
  std::filesystem::remove(good);
  bad = read_compared_run(good.string());
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("cannot read it"), std::string::npos);
}

}  // namespace
}  // namespace hetplan::cli
