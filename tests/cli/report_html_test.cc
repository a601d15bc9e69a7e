// The HTML report: its sections and figures, escaping, determinism, and that a real browser
// (headless Chromium, when installed) parses and renders it.
#include "../../src/cli/report_html.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <tuple>

#include "hetplan/cluster/cluster_file.h"
#include "hetplan/model/zoo.h"
#include "hetplan/plan/strategy.h"
#include "run_command.h"

namespace hetplan::cli {
namespace {

namespace fs = std::filesystem;

// gpt3-125m on the HeteroG testbed (8 devices of three types), dp=2 tp=2 pp=2, simulated once.
class ReportHtml : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto m = model::load_model("gpt3-125m");
    ASSERT_TRUE(m) << m.error().message;
    auto c = cluster::load_cluster("heterog-mixed");
    ASSERT_TRUE(c) << c.error().message;
    auto s = plan::parse_strategy("dp=2,tp=2,pp=2,gbs=16");
    ASSERT_TRUE(s) << s.error().message;
    auto p = plan::plan_from_strategy(*s, *m, *c);
    ASSERT_TRUE(p) << p.error().message;
    sim::SimOptions opts;
    opts.record_events = true;
    auto r = sim::simulate(*m, *c, *p, opts);
    ASSERT_TRUE(r) << r.error().message;
    model_ = std::make_unique<model::Model>(std::move(*m));
    cluster_ = std::make_unique<cluster::Cluster>(std::move(*c));
    plan_ = std::make_unique<plan::Plan>(std::move(*p));
    result_ = std::make_unique<sim::SimResult>(std::move(*r));
  }
  static void TearDownTestSuite() {
    result_.reset();
    plan_.reset();
    cluster_.reset();
    model_.reset();
  }

  static ReportInput input() {
    const double t = result_->iteration_time.value;
    const double mem = result_->max_peak_memory.value;
    return ReportInput{
        *model_,
        *cluster_,
        *plan_,
        *result_,
        "hetplan plan: gpt3-125m on heterog-mixed",
        "strategy",
        0.25,
        false,
        {{"even-dp", 1.5 * t, true},
         {"proportional-dp", 1.2 * t, false},
         {"megatron", std::nullopt, false}},
        {{0.8 * t, 1.4 * mem, "pp=1 tp=2 recompute=none zero=0", false},
         {t, mem, "pp=2 tp=2 recompute=none zero=0", true},
         {1.3 * t, 0.7 * mem, "pp=2 tp=2 recompute=full <script>alert(1)</script>", false}},
        {}};
  }

  // The report of input() with another simulation's result.
  static std::string report_of(const sim::SimResult& r) {
    auto in = input();
    return report_html(ReportInput{in.model,
                                   in.cluster,
                                   in.plan,
                                   r,
                                   in.title,
                                   in.planner,
                                   in.search_time_s,
                                   in.timed_out,
                                   in.baselines,
                                   in.frontier,
                                   {}});
  }

  static inline std::unique_ptr<model::Model> model_;
  static inline std::unique_ptr<cluster::Cluster> cluster_;
  static inline std::unique_ptr<plan::Plan> plan_;
  static inline std::unique_ptr<sim::SimResult> result_;
};

bool contains(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (auto pos = s.find(what); pos != std::string::npos; pos = s.find(what, pos + 1)) ++n;
  return n;
}

TEST_F(ReportHtml, HasEverySectionAndFigure) {
  const std::string html = report_html(input());
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_TRUE(contains(html, "</html>"));
  for (const char* h : {">Cluster</h2>", ">Plan</h2>", ">Timeline</h2>", ">Memory</h2>",
                        ">Baselines</h2>", ">Pareto frontier</h2>"})
    EXPECT_TRUE(contains(html, h)) << h;
  EXPECT_TRUE(contains(html, "<svg class=\"tl\""));
  EXPECT_TRUE(contains(html, "<svg class=\"pf\""));
  // Every kind of compute task of the timeline is drawn, and the legend names all kinds.
  EXPECT_TRUE(contains(html, "<rect class=\"f\""));
  EXPECT_TRUE(contains(html, "<rect class=\"b\""));
  for (const char* k : {"forward", "backward", "optimizer", "p2p", "grad_sync", "param_gather"})
    EXPECT_TRUE(contains(html, std::string("</i>") + k + "</span>")) << k;
  // Every lane is in the timeline: its name in the hover title of its row.
  for (std::size_t l = 0; l < result_->lanes.size(); ++l)
    EXPECT_TRUE(contains(html, result_->lanes[l].name + "</title>") ||
                contains(html, result_->lanes[l].name + "\n"))
        << l;
}

TEST_F(ReportHtml, NamesDevicesTypesLayersAndBaselines) {
  const std::string html = report_html(input());
  for (const auto& d : cluster_->devices) EXPECT_TRUE(contains(html, d.name)) << d.name;
  for (const auto& t : cluster_->device_types) EXPECT_TRUE(contains(html, t.name)) << t.name;
  EXPECT_TRUE(contains(html, model_->layers.front().name));
  EXPECT_TRUE(contains(html, model_->layers.back().name));
  for (const char* b : {"even-dp", "proportional-dp", "megatron"}) EXPECT_TRUE(contains(html, b));
  EXPECT_TRUE(contains(html, "1.50&times;"));  // even-dp is 1.5 times slower than the plan
  EXPECT_TRUE(contains(html, "1.20&times;"));
  EXPECT_TRUE(contains(html, "no plan"));  // megatron
  EXPECT_TRUE(contains(html, "(chosen)"));
  EXPECT_TRUE(contains(html, "50.0%"));  // each of the two replicas gets half of the batch
}

TEST_F(ReportHtml, GroupsDevicesWithIdenticalMemory) {
  const std::string html = report_html(input());
  // One memory row per distinct set of numbers; the two devices of a TP pair always share one.
  std::set<std::tuple<double, double, double>> distinct;
  for (const auto& d : result_->devices)
    if (d.lane >= 0)
      distinct.insert({d.peak_memory.value, d.memory.activations.value, d.capacity.value});
  EXPECT_EQ(count(html, "<td class=\"mdev\">"), static_cast<int>(distinct.size()));
  EXPECT_LE(distinct.size(), cluster_->devices.size() / 2);
  EXPECT_GE(count(html, " devices)</td>"), 1);
}

// `lanes` lanes of 5,000 tasks each, alternating forward and backward every 0.02 pixels; lane l's
// tasks start l * offset seconds later.
sim::SimResult many_tasks(const sim::SimResult& base, int lanes, double offset) {
  sim::SimResult r = base;
  const double t = r.iteration_time.value;
  r.lanes.resize(static_cast<std::size_t>(lanes), r.lanes.front());
  r.events.clear();
  constexpr int kTasks = 5000;
  for (int l = 0; l < lanes; ++l) {
    r.lanes[l].name = "synthetic lane " + std::to_string(l);
    for (int i = 0; i < kTasks; ++i) {
      sim::TaskRecord e;
      e.kind = i % 2 == 0 ? sim::TaskKind::forward : sim::TaskKind::backward;
      e.lane = l;
      e.microbatch = i;
      e.start = Seconds(t * i / kTasks + l * offset);
      e.end = Seconds(t * (i + 1) / kTasks + l * offset);
      r.events.push_back(e);
      if (i % 50 == 0) {
        e.kind = sim::TaskKind::p2p;
        e.end = Seconds(t * (i + 40) / kTasks + l * offset);
        r.events.push_back(e);
      }
    }
  }
  return r;
}

// 200 lanes of unlike timings (lane l ends l microseconds later), 100 in each of two stages: the
// timeline draws 32 rows per stage, each standing for a run of 3 or 4 of the stage's lanes drawn
// by its slowest, so every lane is counted and named, and merges the sub-pixel tasks, so the
// document stays small.
TEST_F(ReportHtml, CapsTheTimelineOfLargePlans) {
  sim::SimResult r = many_tasks(*result_, 200, 1e-6);
  for (int l = 0; l < 200; ++l) r.lanes[l].stages = {l < 100 ? 0 : 1};
  const std::string html = report_of(r);
  EXPECT_TRUE(contains(html, "64 rows stand for the 200 rows of lanes (200 lanes"));
  // Per stage, runs [floor(100 j / 32), floor(100 (j + 1) / 32)): 28 of 3 lanes and 4 of 4, in
  // each of the three timelines.
  EXPECT_EQ(count(html, " and 2 similar</text>"), 3 * 2 * 28);
  EXPECT_EQ(count(html, " and 3 similar</text>"), 3 * 2 * 4);
  // Each stage's first run (lanes 0 to 2, 100 to 102) and the first stage's last (96 to 99), each
  // drawn by its slowest lane: no run spans the two stages.
  for (const char* title : {"<title>synthetic lane 2\nsynthetic lane 0\nsynthetic lane 1<",
                            "<title>synthetic lane 102\nsynthetic lane 100\nsynthetic lane 101<",
                            "<title>synthetic lane 99\nsynthetic lane 96\nsynthetic lane 97\n"
                            "synthetic lane 98<"})
    EXPECT_EQ(count(html, title), 3) << title;
  for (int l = 0; l < 200; ++l) {
    const std::string name = "synthetic lane " + std::to_string(l);
    EXPECT_TRUE(contains(html, name + "\n") || contains(html, name + "</title>")) << l;
  }
  // The whole iteration, then the first and the last micro-batches again, zoomed in far enough
  // that each task is its own bar with its micro-batch's number (the whole is a band of merged
  // bars, with none).
  EXPECT_EQ(count(html, "<title>synthetic lane "), 3 * 64);
  EXPECT_TRUE(contains(html, "The first 6 of 5000 micro-batches"));
  EXPECT_TRUE(contains(html, "The last 6 micro-batches"));
  EXPECT_GT(count(html, "<text class=\"mb\""), 64);
  EXPECT_LT(html.size(), 1u << 20) << "the report of a million tasks should stay under 1 MiB";
}

// More stages than rows (200 lanes, each its own stage): the runs go over the stages in order,
// and still count every lane.
TEST_F(ReportHtml, GroupsRowsAcrossStagesWhenThereAreMoreStagesThanRows) {
  sim::SimResult r = many_tasks(*result_, 200, 1e-6);
  for (int l = 0; l < 200; ++l) r.lanes[l].stages = {199 - l};  // the stage order reverses lanes
  const std::string html = report_of(r);
  EXPECT_TRUE(contains(html, "64 rows stand for the 200 rows of lanes (200 lanes"));
  // Runs [floor(200 j / 64), ...) of the lanes by stage: 56 of 3 and 8 of 4 per timeline, the
  // first stages 0 to 2 (lanes 199 to 197), drawn by its slowest lane (199).
  EXPECT_EQ(count(html, " and 2 similar</text>"), 3 * 56);
  EXPECT_EQ(count(html, " and 3 similar</text>"), 3 * 8);
  EXPECT_EQ(count(html, "<title>synthetic lane 199\nsynthetic lane 198\nsynthetic lane 197<"), 3);
}

// Shares in proportion to the stages' rows take all 64: three stages of 67, 67 and 66 rows get
// 21 each rounded down, and the row left goes to a largest remainder (22, 21, 21).
TEST_F(ReportHtml, GivesTheRowsLeftToTheLargestRemainders) {
  sim::SimResult r = many_tasks(*result_, 200, 1e-6);
  for (int l = 0; l < 200; ++l) r.lanes[l].stages = {l < 67 ? 0 : l < 134 ? 1 : 2};
  const std::string html = report_of(r);
  EXPECT_TRUE(contains(html, "64 rows stand for the 200 rows of lanes (200 lanes"));
  // 67 rows in 22 runs (1 of 4, 21 of 3), 67 in 21 (4 of 4), 66 in 21 (3 of 4): per timeline,
  // 56 rows of 3 lanes and 8 of 4.
  EXPECT_EQ(count(html, " and 2 similar</text>"), 3 * 56);
  EXPECT_EQ(count(html, " and 3 similar</text>"), 3 * 8);
}

// 200 lanes whose tasks are the same (a data-parallel stage on alike devices): one row stands for
// them all, named by each, and nothing is left out.
TEST_F(ReportHtml, DrawsAlikeLanesAsOneRow) {
  const sim::SimResult r = many_tasks(*result_, 200, 0);
  const std::string html = report_of(r);
  EXPECT_FALSE(contains(html, "rows stand for"));     // no grouping note: nothing is grouped
  EXPECT_EQ(count(html, "and 199 alike</text>"), 3);  // the whole iteration and two zooms
  for (int l = 0; l < 50; ++l)
    EXPECT_EQ(count(html, "synthetic lane " + std::to_string(l) + "\n"), 3) << l;
  EXPECT_TRUE(contains(html, "... 150 more</title>"));
}

TEST_F(ReportHtml, EscapesText) {
  auto in = input();
  in.title = "a <b>bold</b> & \"quoted\" title";
  const std::string html = report_html(in);
  EXPECT_FALSE(contains(html, "<script>"));
  EXPECT_TRUE(contains(html, "&lt;script&gt;alert(1)&lt;/script&gt;"));
  EXPECT_FALSE(contains(html, "<b>bold</b>"));
  EXPECT_TRUE(contains(html, "a &lt;b&gt;bold&lt;/b&gt; &amp; &quot;quoted&quot; title"));
}

TEST_F(ReportHtml, IsDeterministic) { EXPECT_EQ(report_html(input()), report_html(input())); }

TEST_F(ReportHtml, NotesAMissingFrontierAndOmitsEmptyBaselines) {
  auto in = input();
  in.frontier.clear();
  in.baselines.clear();
  const std::string html = report_html(in);
  EXPECT_TRUE(contains(html, ">Pareto frontier</h2>"));
  EXPECT_TRUE(contains(html, "No Pareto frontier"));
  EXPECT_FALSE(contains(html, "<svg class=\"pf\""));
  EXPECT_FALSE(contains(html, ">Baselines</h2>"));
}

TEST_F(ReportHtml, FlagsDevicesThatDoNotFit) {
  sim::SimResult r = *result_;
  r.devices[r.lanes.front().devices.front()].fits = false;
  r.fits = false;
  const std::string html = report_of(r);
  EXPECT_TRUE(contains(html, "DOES NOT FIT"));
  EXPECT_FALSE(contains(report_html(input()), "DOES NOT FIT"));
}

TEST_F(ReportHtml, NotesMissingEvents) {
  sim::SimResult r = *result_;
  r.events.clear();
  const std::string html = report_of(r);
  EXPECT_TRUE(contains(html, "No task records"));
  EXPECT_FALSE(contains(html, "<svg class=\"tl\""));
}

// Headless Chromium parses the document (its DOM has every heading) and renders a screenshot.
TEST_F(ReportHtml, RendersInHeadlessChromium) {
  if (std::system("command -v chromium >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "chromium is not installed (scripts install it; CI runs this test)";
  const fs::path dir =
      fs::temp_directory_path() / ("hetplan_report_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path html_file = dir / "report.html";
  const fs::path png = dir / "report.png";
  const fs::path dom = dir / "dom.html";
  {
    std::ofstream out(html_file);
    out << report_html(input());
  }
  const std::string common =
      "timeout 120 chromium --headless --no-sandbox --disable-gpu "
      "--user-data-dir=" +
      (dir / "profile").string() + " ";
  const std::string url = "file://" + html_file.string();
  ASSERT_EQ(
      std::system((common + "--dump-dom " + url + " >" + dom.string() + " 2>/dev/null").c_str()),
      0);
  const std::string parsed = testing::slurp(dom.string());
  for (const char* h : {"Cluster</h2>", "Plan</h2>", "Timeline</h2>", "Memory</h2>",
                        "Baselines</h2>", "Pareto frontier</h2>"})
    EXPECT_TRUE(contains(parsed, h)) << h;
  EXPECT_TRUE(contains(parsed, "<svg class=\"tl\""));
  ASSERT_EQ(std::system((common + "--window-size=1400,2400 --screenshot=" + png.string() + " " +
                         url + " >/dev/null 2>&1")
                            .c_str()),
            0);
  ASSERT_TRUE(fs::exists(png));
  EXPECT_GT(fs::file_size(png), 10u * 1024);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hetplan::cli
