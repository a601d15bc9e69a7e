// The HTML report: one self-contained document (inline CSS and SVG, no scripts, no fetches).
// Every figure is computed from ReportInput alone, so the same input gives the same bytes.
// The figures are drawn by the plotting layer (svg_chart.h: line charts, timelines, stacked
// bars); this file says what they show. Large plans are kept small: the timeline draws lanes
// whose tasks are the same as one row, at most 64 rows (past that, similar rows of a stage are
// grouped, each group drawn by its slowest lane), and merges same-kind bars that are
// narrower than a pixel, so a row holds at most about one bar per pixel column.
#include "report_html.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <map>
#include <numeric>
#include <string_view>
#include <tuple>
#include <utility>

#include "hetplan/core/quantity_parse.h"
#include "reports.h"
#include "svg_chart.h"

namespace hetplan::cli {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string pct(double fraction) { return fmt::format("{:.1f}%", 100 * fraction); }

std::string gib(double bytes) { return fmt::format("{:.2f} GiB", bytes / kGiB); }

// "v100/0/0 .. v100/0/7, v100/2/0 .. v100/2/7": runs of consecutive device ids, at most
// `max_runs` of them, then "+ k more".
std::string device_ranges(const cluster::Cluster& c, std::vector<int> ids, std::size_t max_runs) {
  std::sort(ids.begin(), ids.end());
  std::vector<std::pair<int, int>> runs;
  for (int id : ids) {
    if (!runs.empty() && runs.back().second + 1 == id) {
      runs.back().second = id;
    } else {
      runs.push_back({id, id});
    }
  }
  std::string out;
  std::size_t shown = 0;
  int hidden = 0;
  for (const auto& [a, b] : runs) {
    if (shown == max_runs) {
      hidden += b - a + 1;
      continue;
    }
    if (shown++ > 0) out += ", ";
    out += c.devices[a].name;
    if (b > a) out += (b == a + 1 ? ", " : " .. ") + c.devices[b].name;
  }
  if (hidden > 0) out += fmt::format(" + {} more", hidden);
  return out;
}

const char* kind_class(sim::TaskKind k) {
  switch (k) {
    case sim::TaskKind::forward:
      return "f";
    case sim::TaskKind::backward:
      return "b";
    case sim::TaskKind::optimizer:
      return "o";
    case sim::TaskKind::p2p:
      return "p";
    case sim::TaskKind::grad_sync:
      return "g";
    case sim::TaskKind::param_gather:
      return "a";
    case sim::TaskKind::grad_rebuild:
      return "r";
    case sim::TaskKind::tp_comm:
      return "t";
    case sim::TaskKind::recompute:
      return "c";
  }
  return "f";
}

constexpr sim::TaskKind kAllKinds[] = {
    sim::TaskKind::forward,      sim::TaskKind::backward,  sim::TaskKind::optimizer,
    sim::TaskKind::p2p,          sim::TaskKind::grad_sync, sim::TaskKind::param_gather,
    sim::TaskKind::grad_rebuild, sim::TaskKind::tp_comm,   sim::TaskKind::recompute};

constexpr std::string_view kStyle = R"(
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:24px;
color:#222;background:#fff;max-width:1400px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ccc;
padding-bottom:3px}h3{font-size:15px;margin:16px 0 6px}
nav a{margin-right:14px;color:#2a6ebb;text-decoration:none}
table{border-collapse:collapse;font-size:13px;margin:4px 0 8px}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f3f4f6}td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr.hl td{background:#fff4d6}.bad{color:#c0392b;font-weight:600}.ok{color:#1e7d32}
.note{color:#666;font-size:13px}.cards{display:flex;flex-wrap:wrap;gap:8px;margin:12px 0}
.card{border:1px solid #ddd;border-radius:6px;padding:6px 12px;min-width:110px}
.card b{display:block;font-size:17px}.card span{font-size:12px;color:#666}
.devs{max-width:330px}.mdev{min-width:200px;max-width:340px}.nw{white-space:nowrap}
svg text{font-family:inherit}
.tl text{font-size:11px;fill:#333}.tl .grid{stroke:#e4e4e4;stroke-width:1}
.tl .mb{font-size:9px;fill:#fff;text-anchor:middle}
.f{fill:#4e79a7;background:#4e79a7}.b{fill:#f28e2b;background:#f28e2b}
.o{fill:#76b7b2;background:#76b7b2}.p{fill:#e15759;background:#e15759}
.g{fill:#9467bd;background:#9467bd}.a{fill:#8c564b;background:#8c564b}
.r{fill:#edc948;background:#edc948}.t{fill:#17becf;background:#17becf}
.c{fill:#ff9da7;background:#ff9da7}
.mp{fill:#4e79a7;background:#4e79a7}.mg{fill:#f28e2b;background:#f28e2b}
.mo{fill:#59a14f;background:#59a14f}.ma{fill:#edc948;background:#edc948}
.mf{fill:#bab0ac;background:#bab0ac}.mr{fill:#79706e;background:#79706e}.mx{fill:#d7b5a6;background:#d7b5a6}.mt{fill:#b07aa1;background:#b07aa1}.cap{border:1px solid #999;border-right:3px solid #222}
.pf text{font-size:12px;fill:#333}
.legend{display:flex;flex-wrap:wrap;gap:14px;font-size:12px;margin:4px 0}
.legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:-2px}
)";

// ---- Summary ----------------------------------------------------------------------------------

void write_summary(std::string& o, const ReportInput& in) {
  const auto& r = in.result;
  auto card = [&](const std::string& value, const char* what, bool bad = false) {
    o += fmt::format("<div class=\"card\"><b{}>{}</b><span>{}</span></div>\n",
                     bad ? " class=\"bad\"" : "", html_escape(value), what);
  };
  o += "<div class=\"cards\">\n";
  card(format_duration(r.iteration_time), "iteration time");
  card(fmt::format("{:.1f}", r.samples_per_s), "samples/s");
  if (r.tokens_per_s > 0) card(fmt::format("{:.0f}", r.tokens_per_s), "tokens/s");
  card(fmt::format("{:.1f}", r.tflops_per_device), "TFLOP/s per device");
  card(pct(r.mfu), "MFU");
  card(fmt::format("{} / {}", r.devices_used, in.cluster.num_devices()), "devices used");
  card(gib(r.max_peak_memory.value), "max peak memory");
  card(r.fits ? "fits" : "does not fit", "memory", !r.fits);
  o += "</div>\n";
}

// ---- Cluster ----------------------------------------------------------------------------------

void write_cluster(std::string& o, const ReportInput& in) {
  const auto& c = in.cluster;
  const auto dtype = in.model.dtype;
  o += "<h2 id=\"cluster\">Cluster</h2>\n";
  o += fmt::format("<p>{}: {} devices in {} nodes, network {}{}.</p>\n", html_escape(c.name),
                   c.num_devices(), c.nodes.size(), cluster::to_string(c.network),
                   c.network == cluster::NetworkKind::fat_tree
                       ? fmt::format(" (oversubscription {:g})", c.oversubscription)
                       : "");
  if (!c.groups.empty()) {
    o += "<h3>Node groups</h3>\n<table><tr><th>group</th><th>nodes</th><th>devices per node</th>"
         "<th>device</th><th>memory</th><th>peak " +
         html_escape(model::to_string(dtype)) +
         "</th><th>intra-node bandwidth</th><th>NICs per node</th></tr>\n";
    for (const auto& g : c.groups) {
      const auto& t = c.device_types[g.device_type];
      o += fmt::format(
          "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td>"
          "<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>"
          "<td class=\"n\">{} &times; {}</td></tr>\n",
          html_escape(g.name), g.count, g.devices_per_node, html_escape(t.name), html_escape(format_bytes(t.memory)),
          html_escape(format_flops_rate(t.peak(dtype))), html_escape(format_bandwidth(g.intra_bandwidth)),
          g.nic_count, html_escape(format_bandwidth(g.nic_bandwidth)));
    }
    o += "</table>\n";
  }
  // Device types with how many devices of each the cluster has.
  std::vector<int> per_type(c.device_types.size(), 0);
  for (const auto& d : c.devices) ++per_type[d.type];
  o += "<h3>Device types</h3>\n<table><tr><th>device</th><th>vendor</th><th>count</th>"
       "<th>memory</th><th>peak " +
       html_escape(model::to_string(dtype)) + "</th><th>memory bandwidth</th></tr>\n";
  for (std::size_t t = 0; t < c.device_types.size(); ++t) {
    const auto& dt = c.device_types[t];
    o += fmt::format(
        "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>"
        "<td class=\"n\">{}</td><td class=\"n\">{}</td></tr>\n",
        html_escape(dt.name), html_escape(dt.vendor), per_type[t], html_escape(format_bytes(dt.memory)),
        html_escape(format_flops_rate(dt.peak(dtype))), html_escape(format_bandwidth(dt.memory_bandwidth)));
  }
  o += "</table>\n";
  // Nodes: at most kMaxNodes rows.
  constexpr std::size_t kMaxNodes = 64;
  o += "<h3>Nodes</h3>\n<table><tr><th>node</th><th>group</th><th>devices</th>"
       "<th>device types</th></tr>\n";
  for (std::size_t n = 0; n < c.nodes.size() && n < kMaxNodes; ++n) {
    const auto& node = c.nodes[n];
    std::vector<int> types;
    for (int d : node.devices)
      if (std::find(types.begin(), types.end(), c.devices[d].type) == types.end())
        types.push_back(c.devices[d].type);
    std::string tnames;
    for (int t : types) tnames += (tnames.empty() ? "" : ", ") + c.device_types[t].name;
    o += fmt::format("<tr><td class=\"n\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n", node.id,
                     html_escape(node.group), html_escape(device_ranges(c, node.devices, 4)), html_escape(tnames));
  }
  o += "</table>\n";
  if (c.nodes.size() > kMaxNodes)
    o += fmt::format("<p class=\"note\">{} more nodes not listed.</p>\n",
                     c.nodes.size() - kMaxNodes);
}

// ---- Plan -------------------------------------------------------------------------------------

std::string layer_range(const model::Model& m, const plan::Stage& s) {
  const int first = s.first_layer;
  const int last = s.first_layer + s.num_layers - 1;
  auto name = [&](int i) -> std::string {
    return i >= 0 && i < static_cast<int>(m.layers.size()) ? m.layers[i].name
                                                           : fmt::format("#{}", i);
  };
  if (s.num_layers <= 0) return "(none)";
  std::string names;
  if (s.num_layers <= 3) {
    for (int i = first; i <= last; ++i) names += (i > first ? ", " : "") + name(i);
  } else {
    names = name(first) + " .. " + name(last);
  }
  return fmt::format("{}&ndash;{} ({} layers): {}", first, last, s.num_layers, html_escape(names));
}

void write_plan(std::string& o, const ReportInput& in) {
  const auto& p = in.plan;
  const auto& c = in.cluster;
  o += "<h2 id=\"plan\">Plan</h2>\n<table>\n";
  auto row = [&](const char* key, const std::string& value) {
    o += fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", key, html_escape(value));
  };
  row("model", fmt::format("{} ({:.3g}B parameters, {})", in.model.name,
                           static_cast<double>(in.model.parameters()) / 1e9,
                           model::to_string(in.model.dtype)));
  row("planner", in.planner.empty() ? p.planner : in.planner);
  if (in.search_time_s > 0 || in.timed_out)
    row("search time",
        fmt::format("{:.2f} s{}", in.search_time_s,
                    in.timed_out ? " (stopped by the time limit: best so far)" : ""));
  row("global batch", fmt::format("{} samples", p.global_batch));
  row("micro-batches", fmt::format("{}", p.num_microbatches));
  row("schedule", plan::to_string(p.schedule));
  row("recompute", plan::recompute_name(p.recompute));
  row("ZeRO stage", fmt::format("{}", p.zero_stage));
  row("sequence parallel", p.sequence_parallel ? "yes" : "no");
  row("gradient bucket", format_bytes(Bytes(p.grad_bucket_bytes)));
  if (const std::string transport = gradient_transport_text(p, in.result); !transport.empty())
    row("gradient transport (DLCP)", transport);
  if (p.is_op_level()) {
    row("op groups", fmt::format("{} (execution order {})", p.op_groups.size(),
                                 plan::to_string(p.execution_order)));
    for (std::size_t g = 0; g < p.op_groups.size(); ++g) {
      const auto& og = p.op_groups[g];
      std::string devs;
      for (std::size_t k = 0; k < og.devices.size(); ++k)
        devs += (k > 0 ? ", " : "") + c.devices[og.devices[k]].name;
      row(fmt::format("group {}", g).c_str(),
          fmt::format("{} ops ({} .. {}): {} on {}{}", og.ops.size(), og.ops.front(), og.ops.back(),
                      plan::to_string(og.mode), devs,
                      og.mode == plan::GroupMode::replicate
                          ? std::string(", ") + plan::to_string(og.sync)
                          : std::string()));
    }
  } else {
    row("pipeline stages", fmt::format("{}", p.stages.size()));
  }
  for (const auto& ov : p.op_overrides)
    row("op override", fmt::format("{}: {}", ov.ops, plan::to_string(ov.split)));
  for (const auto& gs : p.grad_sync)
    row("gradient sync", fmt::format("{}: {} ({}, priority {})", gs.ops, plan::to_string(gs.method),
                                     plan::algorithm_name(gs.algorithm), gs.priority));
  o += "</table>\n";

  constexpr std::size_t kMaxReplicas = 16;  // rows per stage
  o += "<h3>Stages</h3>\n<table><tr><th>stage</th><th>layers</th><th>replica</th>"
       "<th>devices</th><th>tensor-parallel shares</th><th>batch share</th></tr>\n";
  for (std::size_t s = 0; s < p.stages.size(); ++s) {
    const auto& st = p.stages[s];
    const std::size_t shown = std::min(st.replicas.size(), kMaxReplicas);
    const std::size_t rows = shown + (st.replicas.size() > shown ? 1 : 0);
    for (std::size_t r = 0; r < shown; ++r) {
      const auto& rep = st.replicas[r];
      o += "<tr>";
      if (r == 0)
        o += fmt::format("<td class=\"n\" rowspan=\"{}\">{}</td><td rowspan=\"{}\">{}</td>",
                         std::max<std::size_t>(rows, 1), s, std::max<std::size_t>(rows, 1),
                         layer_range(in.model, st));
      std::string devs;
      for (std::size_t k = 0; k < rep.devices.size(); ++k) {
        const int d = rep.devices[k];
        devs += (k > 0 ? ", " : "") +
                (d >= 0 && d < c.num_devices() ? c.devices[d].name : fmt::format("#{}", d));
      }
      std::string shares;
      if (rep.tp_shares.empty()) {
        shares = rep.devices.size() > 1 ? "even" : "&ndash;";
      } else {
        for (std::size_t k = 0; k < rep.tp_shares.size(); ++k)
          shares += (k > 0 ? " / " : "") + pct(rep.tp_shares[k]);
      }
      o += fmt::format(
          "<td class=\"n\">{}</td><td class=\"devs\">{}</td><td>{}</td><td class=\"n\">{}</td>"
          "</tr>\n",
          r, html_escape(devs), shares, pct(rep.batch_share));
    }
    if (st.replicas.size() > shown)
      o += fmt::format("<tr><td colspan=\"4\" class=\"note\">{} more replicas</td></tr>\n",
                       st.replicas.size() - shown);
    if (st.replicas.empty())
      o += fmt::format(
          "<tr><td class=\"n\">{}</td><td>{}</td><td colspan=\"4\">no replicas</td>"
          "</tr>\n",
          s, layer_range(in.model, st));
  }
  o += "</table>\n";
}

// ---- Timeline ---------------------------------------------------------------------------------

struct Bar {
  sim::TaskKind kind;                               // the kind with the most time in it
  double x0, x1;                                    // pixels
  int count;                                        // tasks merged into it
  int first;                                        // index of its first task in result.events
  std::array<double, std::size(kAllKinds)> time{};  // seconds per kind
};

// Merging keeps a row at a few bars per pixel column however many tasks it has: a task joins
// the last bar of its kind when it overlaps it, or when either is narrower than a pixel and less
// than a pixel apart; a task narrower than a pixel also joins the row's last bar (of any kind)
// when less than a pixel away. So, per row, bars of one kind that were not merged are at least a
// pixel wide and do not overlap, and narrow ones start at least a pixel apart.
std::vector<Bar> merge_bars(const std::vector<sim::TaskRecord>& ev, std::vector<int> idx,
                            const TimelineScale& scale) {
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) {
    return std::tie(ev[a].start.value, ev[a].end.value) <
           std::tie(ev[b].start.value, ev[b].end.value);
  });
  std::vector<Bar> bars;
  std::array<int, std::size(kAllKinds)> last_of_kind;
  last_of_kind.fill(-1);
  for (int i : idx) {
    const auto k = static_cast<std::size_t>(ev[i].kind);
    const double t = std::max(ev[i].end.value - ev[i].start.value, 0.0);
    const double x0 = scale.x(ev[i].start.value);
    const double x1 = x0 + t * scale.px_per_s;
    const bool narrow = x1 - x0 < 1;
    int into = -1;
    if (last_of_kind[k] >= 0) {
      const Bar& same = bars[last_of_kind[k]];
      const bool overlaps = x0 < same.x1 - 0.01;
      if (overlaps || ((narrow || same.x1 - same.x0 < 1) && x0 <= same.x1 + 1))
        into = last_of_kind[k];
    }
    if (into < 0 && narrow && !bars.empty() && x0 <= bars.back().x1 + 1)
      into = static_cast<int>(bars.size()) - 1;
    if (into < 0) {
      bars.push_back({ev[i].kind, x0, x1, 1, i, {}});
      bars.back().time[k] = t;
      last_of_kind[k] = static_cast<int>(bars.size()) - 1;
      continue;
    }
    Bar& b = bars[into];
    b.x1 = std::max(b.x1, x1);
    ++b.count;
    b.time[k] += t;
    const auto top = std::max_element(b.time.begin(), b.time.end()) - b.time.begin();
    if (b.time[top] > b.time[static_cast<std::size_t>(b.kind)]) b.kind = kAllKinds[top];
    last_of_kind[k] = into;
  }
  return bars;
}

std::string lane_label(const ReportInput& in, int l) {
  const auto& lane = in.result.lanes[l];
  std::string out = fmt::format("lane {}", l);
  if (!lane.stages.empty()) {
    out += lane.stages.size() == 1 ? " · stage " : " · stages ";
    for (std::size_t k = 0; k < lane.stages.size() && k < 3; ++k)
      out += (k > 0 ? "," : "") + std::to_string(lane.stages[k]);
    if (lane.stages.size() > 3) out += "..";
  }
  if (!lane.devices.empty() && lane.devices.front() < in.cluster.num_devices()) {
    out += " · " + in.cluster.devices[lane.devices.front()].name;
    if (lane.devices.size() > 1) out += fmt::format(" +{}", lane.devices.size() - 1);
  }
  return out;
}

// The lanes whose tasks are the same, to the nanosecond (kind, stage, micro-batch, bucket, start
// and end): the replicas of a data-parallel stage on alike devices. Each group is one row of the
// timeline, in the order of its first lane.
std::vector<std::vector<int>> alike_lanes(const sim::SimResult& r) {
  using Task = std::tuple<int, int, int, int, long long, long long>;
  const int n_lanes = static_cast<int>(r.lanes.size());
  std::vector<std::vector<Task>> tasks(static_cast<std::size_t>(n_lanes));
  for (const auto& e : r.events)
    if (e.lane >= 0 && e.lane < n_lanes)
      tasks[e.lane].emplace_back(static_cast<int>(e.kind), e.stage, e.microbatch, e.bucket,
                                 std::llround(e.start.value * 1e9),
                                 std::llround(e.end.value * 1e9));
  std::map<std::vector<Task>, std::size_t> row_of;
  std::vector<std::vector<int>> rows;
  for (int l = 0; l < n_lanes; ++l) {
    auto [it, fresh] = row_of.try_emplace(std::move(tasks[l]), rows.size());
    if (fresh) rows.emplace_back();
    rows[it->second].push_back(l);
  }
  return rows;
}

// A row of the timeline: the lanes it stands for, the first drawn; the first `alike` have the
// same tasks, the rest similar ones (grouped_rows).
struct ShownRow {
  std::vector<int> lanes;
  std::size_t alike;
};

// Past `most` rows of alike lanes, rows grouped so that every lane still has one: per stage (a
// lane's first), its rows sorted by when their last task ends and cut into runs of near-equal
// length, a stage's share of `most` rows in proportion to its rows (at least one, the rows left
// to the largest remainders) while there are no more stages than rows; past that, runs over the
// stages in order. Each run is one row, drawn by its slowest lane (the last to end), in stage
// order, then by end.
std::vector<ShownRow> grouped_rows(const sim::SimResult& r,
                                   const std::vector<std::vector<int>>& rows, std::size_t most) {
  std::vector<double> last_end(r.lanes.size(), 0);
  for (const auto& e : r.events)
    if (e.lane >= 0 && static_cast<std::size_t>(e.lane) < last_end.size())
      last_end[e.lane] = std::max(last_end[e.lane], e.end.value);
  auto stage_of = [&](std::size_t row) {
    const auto& lane = r.lanes[rows[row].front()];
    return lane.stages.empty() ? -1 : lane.stages.front();
  };
  std::vector<std::size_t> order(rows.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (stage_of(a) != stage_of(b)) return stage_of(a) < stage_of(b);
    return last_end[rows[a].front()] < last_end[rows[b].front()];
  });
  // Runs [begin, end) of order, each one row.
  std::vector<std::pair<std::size_t, std::size_t>> runs;
  auto cut = [&](std::size_t begin, std::size_t n, std::size_t parts) {
    for (std::size_t j = 0; j < parts; ++j)
      runs.emplace_back(begin + j * n / parts, begin + (j + 1) * n / parts);
  };
  std::vector<std::pair<std::size_t, std::size_t>> stages;  // each stage's [begin, end)
  for (std::size_t i = 0; i < order.size(); ++i)
    if (i == 0 || stage_of(order[i]) != stage_of(order[i - 1]))
      stages.emplace_back(i, i + 1);
    else
      stages.back().second = i + 1;
  if (stages.size() > most) {
    cut(0, order.size(), most);
  } else {
    const std::size_t n = order.size();
    std::vector<std::size_t> share;
    std::size_t total = 0;
    for (const auto& [b, e] : stages) {
      share.push_back(std::max<std::size_t>(1, most * (e - b) / n));
      total += share.back();
    }
    while (total > most) {  // the largest share gives one up
      --*std::max_element(share.begin(), share.end());
      --total;
    }
    // The rows left go to the largest remainders (stages with rows to spare), earlier first.
    std::vector<std::size_t> by_remainder(stages.size());
    std::iota(by_remainder.begin(), by_remainder.end(), std::size_t{0});
    auto remainder = [&](std::size_t k) { return most * (stages[k].second - stages[k].first) % n; };
    std::stable_sort(by_remainder.begin(), by_remainder.end(),
                     [&](std::size_t a, std::size_t b) { return remainder(a) > remainder(b); });
    for (bool more = true; more && total < most;) {
      more = false;
      for (std::size_t k : by_remainder)
        if (total < most && share[k] < stages[k].second - stages[k].first) {
          ++share[k];
          ++total;
          more = true;
        }
    }
    for (std::size_t k = 0; k < stages.size(); ++k)  // (a share never exceeds its rows)
      cut(stages[k].first, stages[k].second - stages[k].first, share[k]);
  }
  std::vector<ShownRow> out;
  for (const auto& [b, e] : runs) {
    std::size_t slowest = e - 1;  // within a stage, the last of the run
    for (std::size_t i = b; i < e; ++i)
      if (last_end[rows[order[i]].front()] > last_end[rows[order[slowest]].front()]) slowest = i;
    ShownRow row{rows[order[slowest]], rows[order[slowest]].size()};
    for (std::size_t i = b; i < e; ++i)
      if (i != slowest)
        row.lanes.insert(row.lanes.end(), rows[order[i]].begin(), rows[order[i]].end());
    out.push_back(std::move(row));
  }
  return out;
}

// A row's label (its first lane's, and how many more it stands for) and hover title (every
// lane's name, the first 50 of a larger group).
std::pair<std::string, std::string> row_label(const ReportInput& in, const ShownRow& row) {
  std::string label = lane_label(in, row.lanes.front());
  if (row.alike > 1) label += fmt::format(" and {} alike", row.alike - 1);
  if (row.lanes.size() > row.alike)
    label += fmt::format(" and {} similar", row.lanes.size() - row.alike);
  constexpr std::size_t kMaxNames = 50;
  std::string names;
  for (std::size_t k = 0; k < row.lanes.size() && k < kMaxNames; ++k)
    names += (k > 0 ? "\n" : "") + in.result.lanes[row.lanes[k]].name;
  if (row.lanes.size() > kMaxNames)
    names += fmt::format("\n... {} more", row.lanes.size() - kMaxNames);
  return {label, names};
}

// A window of the timeline: the tasks of each row's first lane between t0 and t1 (seconds),
// clipped to it, tasks narrower than a pixel merged (merge_bars).
std::string timeline_svg(const ReportInput& in, const std::vector<ShownRow>& shown, double t0,
                         double t1, const std::string& what) {
  const auto& r = in.result;
  const auto& ev = r.events;
  constexpr std::size_t kMaxTitles = 8000;  // hover titles only while the file stays small
  const int n_lanes = static_cast<int>(r.lanes.size());
  std::vector<int> row_of(n_lanes, -1);
  for (std::size_t i = 0; i < shown.size(); ++i)
    row_of[shown[i].lanes.front()] = static_cast<int>(i);
  if (!(t1 > t0)) t1 = t0 + 1e-6;
  const TimelineScale scale = timeline_scale(t0, t1);
  const TimeUnit unit = time_unit(t1);

  std::vector<std::vector<int>> compute(shown.size()), transfer(shown.size());
  for (std::size_t i = 0; i < ev.size(); ++i) {
    const int l = ev[i].lane;
    if (l < 0 || l >= n_lanes || row_of[l] < 0) continue;
    // In the window: overlapping it, or an instant inside it.
    const double a = ev[i].start.value, b = ev[i].end.value;
    if (b > a ? (b <= t0 || a >= t1) : (a < t0 || a > t1)) continue;
    (is_transfer(ev[i].kind) ? transfer : compute)[row_of[l]].push_back(static_cast<int>(i));
  }
  std::vector<std::vector<Bar>> cbars(shown.size()), tbars(shown.size());
  std::size_t total_bars = 0;
  for (std::size_t k = 0; k < shown.size(); ++k) {
    cbars[k] = merge_bars(ev, compute[k], scale);
    tbars[k] = merge_bars(ev, transfer[k], scale);
    total_bars += cbars[k].size() + tbars[k].size();
  }

  Timeline tl;
  tl.label = what;
  tl.t0 = t0;
  tl.t1 = t1;
  tl.mark = r.iteration_time.value;
  tl.titles = total_bars <= kMaxTitles;
  auto seconds = [&](double x) { return (x - scale.x_of_zero) / scale.px_per_s; };
  auto bar_title = [&](const Bar& b) {
    const auto& e = ev[b.first];
    const double b0 = seconds(b.x0) * unit.scale, b1 = seconds(b.x1) * unit.scale;
    if (b.count > 1) {
      std::string kinds;
      for (std::size_t k = 0; k < b.time.size(); ++k)
        if (b.time[k] > 0)
          kinds += (kinds.empty() ? "" : ", ") + std::string(sim::to_string(kAllKinds[k]));
      return fmt::format("{} tasks ({}), {:.4g}–{:.4g} {}", b.count, kinds, b0, b1, unit.name);
    }
    std::string task = fmt::format("{} stage {}", sim::to_string(e.kind), e.stage);
    if (e.microbatch >= 0) task += fmt::format(" micro-batch {}", e.microbatch);
    if (e.bucket >= 0) task += fmt::format(" bucket {}", e.bucket);
    if (e.peer_lane >= 0) task += fmt::format(" to lane {}", e.peer_lane);
    return fmt::format("{}, {:.4g}–{:.4g} {}", task, b0, b1, unit.name);
  };
  // (Bars are clipped to the window by the chart; their titles keep their tasks' own times.)
  auto bar = [&](const Bar& b, bool lower) {
    TimelineBar out{seconds(b.x0), seconds(b.x1), lower, kind_class(b.kind)};
    if (tl.titles) out.title = bar_title(b);
    // Micro-batch numbers inside wide enough forward and backward bars.
    const auto& e = ev[b.first];
    if (!lower && b.count == 1 && e.microbatch >= 0) out.text = std::to_string(e.microbatch);
    return out;
  };
  for (std::size_t k = 0; k < shown.size(); ++k) {
    auto [label, names] = row_label(in, shown[k]);
    TimelineRow row{std::move(label), std::move(names), {}};
    row.bars.reserve(cbars[k].size() + tbars[k].size());
    for (const auto& b : cbars[k]) row.bars.push_back(bar(b, false));
    for (const auto& b : tbars[k]) row.bars.push_back(bar(b, true));
    tl.rows.push_back(std::move(row));
  }
  return timeline_svg(tl);
}

void write_timeline(std::string& o, const ReportInput& in) {
  const auto& r = in.result;
  const auto& ev = r.events;
  o += "<h2 id=\"timeline\">Timeline</h2>\n";
  if (r.lanes.empty() || ev.empty()) {
    o += "<p class=\"note\">No task records: the plan was simulated without recording events."
         "</p>\n";
    return;
  }
  // Every lane has a row, alike lanes one together; similar ones too when there are too many.
  constexpr std::size_t kMaxRows = 64;
  const std::vector<std::vector<int>> rows = alike_lanes(r);
  std::vector<ShownRow> shown;
  if (rows.size() <= kMaxRows)
    for (const auto& row : rows) shown.push_back({row, row.size()});
  else
    shown = grouped_rows(r, rows, kMaxRows);
  double t_end = r.iteration_time.value;
  int microbatches = 0, stages = 0;
  for (const auto& e : ev) {
    t_end = std::max(t_end, e.end.value);
    microbatches = std::max(microbatches, e.microbatch + 1);
    stages = std::max(stages, e.stage + 1);
  }
  if (!(t_end > 0)) t_end = 1e-6;

  if (rows.size() > kMaxRows)
    o += fmt::format(
        "<p class=\"note\">{} rows stand for the {} rows of lanes ({} lanes; lanes whose tasks "
        "are the same share a row): per stage, rows are grouped by when their last task ends (with "
        "more stages than rows, groups of neighbouring stages), and each group is drawn by its "
        "slowest lane, the others counted in its label (&ldquo;and N similar&rdquo;) and named in "
        "its hover text.</p>\n",
        shown.size(), rows.size(), r.lanes.size());
  o += "<div class=\"legend\">";
  for (auto k : kAllKinds)
    o += fmt::format("<span><i class=\"{}\"></i>{}</span>", kind_class(k), sim::to_string(k));
  o += "</div>\n";
  o += timeline_svg(in, shown, 0, t_end, "timeline of one iteration");
  o +=
      "<p class=\"note\">One row per lane (a tensor-parallel replica), or per group of lanes "
      "whose tasks are the same (&ldquo;and N alike&rdquo;; hover for their names): compute above, "
      "its outgoing transfers in the thin row below. Numbers are micro-batches; the dashed line is "
      "the end of the iteration. Tasks narrower than a pixel are merged.</p>\n";
  // With many micro-batches the whole iteration is a band of merged tasks: the first and the
  // last micro-batches (the pipeline filling, and draining into the gradient synchronisation and
  // the optimizer step) are drawn again at a scale where each task is its own bar.
  const int zoom = 2 * std::max(1, stages) + 4;
  if (microbatches <= 2 * zoom) return;
  double first_end = 0, last_start = t_end;
  for (const auto& e : ev) {
    if (e.microbatch < 0 || is_transfer(e.kind)) continue;
    if (e.microbatch < zoom && e.kind == sim::TaskKind::forward)
      first_end = std::max(first_end, e.end.value);
    if (e.microbatch >= microbatches - zoom && e.kind == sim::TaskKind::backward)
      last_start = std::min(last_start, e.start.value);
  }
  if (first_end > 0) {
    o += fmt::format("<h3>The first {} of {} micro-batches</h3>\n", zoom, microbatches);
    o += timeline_svg(in, shown, 0, first_end,
                      fmt::format("timeline of the first {} micro-batches", zoom));
  }
  if (last_start < t_end) {
    o += fmt::format("<h3>The last {} micro-batches, to the end of the iteration</h3>\n", zoom);
    o += timeline_svg(in, shown, last_start, t_end,
                      fmt::format("timeline of the last {} micro-batches", zoom));
  }
}

// ---- Memory -----------------------------------------------------------------------------------

struct MemRow {
  std::vector<int> devices;
  const sim::DeviceStats* stats;
};

void write_memory(std::string& o, const ReportInput& in) {
  const auto& r = in.result;
  const auto& c = in.cluster;
  o += "<h2 id=\"memory\">Memory</h2>\n";
  // Devices with identical numbers share a row.
  using Key = std::tuple<int, double, double, double, double, double, double, double, double,
                         double, double, bool>;
  std::map<Key, std::size_t> row_of;
  std::vector<MemRow> rows;
  int unused = 0;
  for (const auto& d : r.devices) {
    if (d.lane < 0) {
      ++unused;
      continue;
    }
    const int type = d.device < c.num_devices() ? c.devices[d.device].type : -1;
    const auto& m = d.memory;
    Key key{type,
            d.peak_memory.value,
            m.parameters.value,
            m.gradients.value,
            m.optimizer.value,
            m.activations.value,
            m.transient.value,
            m.buffers.value,
            m.reserve.value,
            m.fragmentation.value,
            d.capacity.value,
            d.fits};
    auto [it, inserted] = row_of.emplace(key, rows.size());
    if (inserted) rows.push_back({{}, &d});
    rows[it->second].devices.push_back(d.device);
  }
  if (rows.empty()) {
    o += "<p class=\"note\">The plan uses no devices.</p>\n";
    return;
  }
  constexpr std::size_t kMaxRows = 64;
  std::size_t omitted = 0;
  if (rows.size() > kMaxRows) {
    // Keep the fullest rows (those not fitting first), shown in device order.
    std::vector<std::size_t> order(rows.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    auto use = [&](std::size_t i) {
      const auto* s = rows[i].stats;
      return s->capacity.value > 0 ? s->peak_memory.value / s->capacity.value : 1e9;
    };
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      if (rows[a].stats->fits != rows[b].stats->fits) return !rows[a].stats->fits;
      return use(a) > use(b);
    });
    order.resize(kMaxRows);
    std::sort(order.begin(), order.end());
    std::vector<MemRow> kept;
    for (auto i : order) kept.push_back(rows[i]);
    omitted = rows.size() - kept.size();
    rows = std::move(kept);
  }
  double scale_max = 0;
  for (const auto& row : rows)
    scale_max = std::max({scale_max, row.stats->capacity.value, row.stats->peak_memory.value});
  if (!(scale_max > 0)) scale_max = 1;

  o += "<div class=\"legend\"><span><i class=\"mp\"></i>parameters</span><span><i class=\"mg\">"
       "</i>gradients</span><span><i class=\"mo\"></i>optimizer</span><span><i class=\"ma\"></i>"
       "activations</span><span><i class=\"mt\"></i>transient</span><span><i class=\"mf\"></i>"
       "buffers</span><span><i class=\"mr\"></i>"
       "reserve</span><span><i class=\"mx\"></i>fragmentation</span><span><i class=\"cap\">"
       "</i>capacity</span></div>\n";
  o += "<table><tr><th>devices</th><th>device</th><th>peak against capacity</th><th>peak</th>"
       "<th>capacity</th><th>parameters</th><th>gradients</th><th>optimizer</th>"
       "<th>activations</th><th>transient</th><th>buffers</th><th>reserve</th><th>fragmentation</"
       "th><th></th></tr>\n";
  for (const auto& row : rows) {
    const auto& s = *row.stats;
    const auto& m = s.memory;
    std::string label = device_ranges(c, row.devices, 3);
    if (row.devices.size() > 1) label += fmt::format(" ({} devices)", row.devices.size());
    const std::string type =
        s.device < c.num_devices() ? c.type_of(s.device).name : std::string("?");
    StackedBar bar;
    bar.parts = {{"mp", m.parameters.value}, {"mg", m.gradients.value},
                 {"mo", m.optimizer.value},  {"ma", m.activations.value},
                 {"mt", m.transient.value},  {"mf", m.buffers.value},
                 {"mr", m.reserve.value},    {"mx", m.fragmentation.value}};
    bar.band = s.capacity.value;
    bar.scale_max = scale_max;
    const std::string svg = stacked_bar_svg(bar);
    o += fmt::format(
        "<tr{}><td class=\"mdev\">{}</td><td class=\"nw\">{}</td><td>{}</td><td class=\"n\">{}</td>"
        "<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>"
        "<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td "
        "class=\"n\">{}</td>"
        "<td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>\n",
        s.fits ? "" : " class=\"hl\"", html_escape(label), html_escape(type), svg,
        gib(s.peak_memory.value), gib(s.capacity.value), gib(m.parameters.value),
        gib(m.gradients.value), gib(m.optimizer.value), gib(m.activations.value),
        gib(m.transient.value), gib(m.buffers.value), gib(m.reserve.value),
        gib(m.fragmentation.value),
        s.fits ? "<span class=\"ok\">fits</span>" : "<span class=\"bad\">DOES NOT FIT</span>");
  }
  o += "</table>\n";
  if (omitted > 0)
    o += fmt::format(
        "<p class=\"note\">{} more rows of devices with lower memory use not shown.</p>\n",
        omitted);
  if (unused > 0)
    o += fmt::format("<p class=\"note\">{} devices are not used by the plan.</p>\n", unused);
}

// ---- Baselines --------------------------------------------------------------------------------

void write_baselines(std::string& o, const ReportInput& in) {
  if (in.baselines.empty()) return;
  const double t = in.result.iteration_time.value;
  o += "<h2 id=\"baselines\">Baselines</h2>\n<table><tr><th>plan</th><th>iteration time</th>"
       "<th>fits</th><th>speed-up of this plan</th></tr>\n";
  o += fmt::format(
      "<tr class=\"hl\"><td>this plan ({})</td><td class=\"n\">{}</td><td>{}</td>"
      "<td class=\"n\">1.00&times;</td></tr>\n",
      html_escape(in.planner.empty() ? in.plan.planner : in.planner), html_escape(format_duration(Seconds(t))),
      in.result.fits ? "yes" : "<span class=\"bad\">no</span>");
  for (const auto& b : in.baselines) {
    if (!b.iteration_time_s) {
      o += fmt::format(
          "<tr><td>{}</td><td class=\"n\">no plan</td><td>&ndash;</td><td class=\"n\">&ndash;"
          "</td></tr>\n",
          html_escape(b.name));
      continue;
    }
    const double bt = *b.iteration_time_s;
    o += fmt::format(
        "<tr><td>{}</td><td class=\"n\">{}</td><td>{}</td><td class=\"n\">{}</td></tr>\n",
        html_escape(b.name), html_escape(format_duration(Seconds(bt))),
        b.fits ? "yes" : "<span class=\"bad\">no</span>",
        t > 0 ? fmt::format("{:.2f}&times;", bt / t) : std::string("&ndash;"));
  }
  o += "</table>\n<p class=\"note\">Speed-up: the baseline's iteration time divided by this "
       "plan's (above 1: this plan is faster).</p>\n";
}

// ---- Pareto frontier --------------------------------------------------------------------------

void write_frontier(std::string& o, const ReportInput& in) {
  o += "<h2 id=\"frontier\">Pareto frontier</h2>\n";
  std::vector<const ReportFrontierPoint*> pts;
  for (const auto& p : in.frontier)
    if (std::isfinite(p.iteration_time_s) && std::isfinite(p.max_peak_bytes)) pts.push_back(&p);
  if (pts.empty()) {
    o += "<p class=\"note\">No Pareto frontier for this report (only one plan was evaluated, or "
         "the planner does not trade time against memory).</p>\n";
    return;
  }
  std::stable_sort(pts.begin(), pts.end(), [](const auto* a, const auto* b) {
    return std::tie(a->iteration_time_s, a->max_peak_bytes) <
           std::tie(b->iteration_time_s, b->max_peak_bytes);
  });
  double y_hi = 0;
  for (const auto* p : pts) y_hi = std::max(y_hi, p->max_peak_bytes / kGiB);
  // The smallest memory among the devices in use, when it is near the points.
  double cap = 0;
  for (const auto& d : in.result.devices)
    if (d.lane >= 0 && d.capacity.value > 0)
      cap = cap == 0 ? d.capacity.value : std::min(cap, d.capacity.value);
  cap /= kGiB;
  const TimeUnit unit = time_unit(pts.back()->iteration_time_s);
  LineChart chart;
  chart.label = "Pareto frontier";
  chart.css_class = "pf";
  chart.x_label = fmt::format("iteration time ({})", unit.name);
  chart.y_label = "max peak memory per device (GiB)";
  chart.y_from_zero = true;
  chart.x_margin = 0.08;
  if (cap > 0 && cap <= 1.5 * std::max(y_hi, 1e-9))
    chart.rules.push_back({cap, fmt::format("smallest device memory in use ({:.1f} GiB)", cap)});
  // The frontier's points, numbered as the table below, each label left out where it would
  // overlap another; the chosen plan's label is placed first, so that no other takes its place.
  ChartSeries chosen{"chosen plan", {}, {}, false, true};
  chosen.marker_radius = 7;
  chosen.colour = "#e15759";
  chosen.bold_labels = true;
  ChartSeries front{"frontier: no other plan is both faster and leaner", {}, {}, true, true};
  front.steps = true;
  front.colour = "#4e79a7";
  for (std::size_t i = 0; i < pts.size(); ++i) {
    const auto& p = *pts[i];
    const double x = p.iteration_time_s * unit.scale, y = p.max_peak_bytes / kGiB;
    const std::string title = fmt::format("{}: {:.4g} {}, {:.2f} GiB", p.label, x, unit.name, y);
    front.x.push_back(x);
    front.y.push_back(y);
    front.titles.push_back(title);
    front.labels.push_back(p.chosen ? "" : std::to_string(i + 1));
    if (p.chosen) {
      chosen.x.push_back(x);
      chosen.y.push_back(y);
      chosen.titles.push_back(title);
      chosen.labels.push_back(fmt::format("{} (chosen)", i + 1));
    }
  }
  chosen.labels_first = true;
  chart.series.push_back(std::move(front));
  if (!chosen.x.empty()) chart.series.push_back(std::move(chosen));  // drawn over the frontier
  o += line_chart_svg(chart);
  o += "<table><tr><th>#</th><th>plan</th><th>iteration time</th><th>max peak memory</th></tr>\n";
  for (std::size_t i = 0; i < pts.size(); ++i) {
    const auto& p = *pts[i];
    o += fmt::format(
        "<tr{}><td class=\"n\">{}</td><td>{}{}</td><td class=\"n\">{}</td>"
        "<td class=\"n\">{}</td></tr>\n",
        p.chosen ? " class=\"hl\"" : "", i + 1, html_escape(p.label), p.chosen ? " <b>(chosen)</b>" : "",
        html_escape(format_duration(Seconds(p.iteration_time_s))), gib(p.max_peak_bytes));
  }
  o += "</table>\n";
}

// ---- Time against money -----------------------------------------------------------------------

void write_rent(std::string& o, const ReportInput& in) {
  if (in.rent.empty()) return;
  o += "<h2 id=\"rent\">Time against money</h2>\n";
  o += "<p class=\"note\">The planner run on subsets of the cluster's devices. Each plan is priced "
       "by the devices it uses: dollars per hour, times the iteration time, give dollars per "
       "iteration.</p>\n";
  LineChart chart;
  chart.label = "iteration time against dollars per iteration";
  chart.x_label = "iteration time (s)";
  chart.y_label = "US dollars per iteration";
  chart.y_from_zero = true;
  ChartSeries all{"every subset that fits", {}, {}, false, true};
  ChartSeries front{"frontier: no other is both faster and cheaper", {}, {}, true, false};
  ChartSeries fastest{"fastest", {}, {}, false, true};
  ChartSeries chosen{"chosen", {}, {}, false, true};
  std::vector<const ReportRentPoint*> fit;
  for (const auto& p : in.rent)
    if (p.fits) fit.push_back(&p);
  std::stable_sort(fit.begin(), fit.end(), [](const auto* a, const auto* b) {
    return std::tie(a->iteration_time_s, a->usd_per_iteration) <
           std::tie(b->iteration_time_s, b->usd_per_iteration);
  });
  double cheapest_so_far = std::numeric_limits<double>::infinity();
  for (const auto* p : fit) {
    all.x.push_back(p->iteration_time_s);
    all.y.push_back(p->usd_per_iteration);
    if (p->usd_per_iteration < cheapest_so_far) {
      cheapest_so_far = p->usd_per_iteration;
      front.x.push_back(p->iteration_time_s);
      front.y.push_back(p->usd_per_iteration);
    }
    for (auto* s : {p->fastest ? &fastest : nullptr, p->chosen ? &chosen : nullptr})
      if (s) {
        s->x.push_back(p->iteration_time_s);
        s->y.push_back(p->usd_per_iteration);
      }
  }
  chart.series = {all, front, fastest, chosen};
  o += line_chart_svg(chart);
  o += "<table><tr><th>devices</th><th>iteration time</th><th>$ per hour</th><th>$ per "
       "iteration</th><th></th></tr>\n";
  for (const auto& p : in.rent) {
    const std::string mark = p.chosen && p.fastest ? "chosen, fastest"
                             : p.chosen            ? "chosen"
                             : p.fastest           ? "fastest"
                                                   : p.note;
    if (!p.fits) {
      o += fmt::format("<tr><td>{}</td><td colspan=\"3\"></td><td>{}</td></tr>\n",
                       html_escape(p.label), html_escape(p.note));
      continue;
    }
    o += fmt::format(
        "<tr{}><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{:.2f}</td><td "
        "class=\"n\">{:.4g}</td><td>{}</td></tr>\n",
        p.chosen ? " class=\"hl\"" : "", html_escape(p.label),
        html_escape(format_duration(Seconds(p.iteration_time_s))), p.usd_per_hour,
        p.usd_per_iteration, html_escape(mark));
  }
  o += "</table>\n";
}

}  // namespace

std::string report_html(const ReportInput& in) {
  std::string o;
  o.reserve(1 << 16);
  o += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  o += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  o += "<title>" + html_escape(in.title) + "</title>\n<style>";
  o += kStyle;
  o += "</style>\n</head>\n<body>\n";
  o += "<h1>" + html_escape(in.title) + "</h1>\n";
  o += fmt::format("<p class=\"note\">{} on {}, planner {}.</p>\n", html_escape(in.model.name),
                   html_escape(in.cluster.name), html_escape(in.planner.empty() ? in.plan.planner : in.planner));
  o += "<nav><a href=\"#cluster\">Cluster</a><a href=\"#plan\">Plan</a><a href=\"#timeline\">"
       "Timeline</a><a href=\"#memory\">Memory</a>";
  if (!in.baselines.empty()) o += "<a href=\"#baselines\">Baselines</a>";
  o += "<a href=\"#frontier\">Pareto frontier</a>";
  if (!in.rent.empty()) o += "<a href=\"#rent\">Time against money</a>";
  o += "</nav>\n";
  write_summary(o, in);
  write_cluster(o, in);
  write_plan(o, in);
  write_timeline(o, in);
  write_memory(o, in);
  write_baselines(o, in);
  write_frontier(o, in);
  write_rent(o, in);
  o += "</body>\n</html>\n";
  return o;
}

}  // namespace hetplan::cli
