#include "reports.h"

#include <fmt/format.h>

#include "commands.h"
#include "report_html.h"

namespace hetplan::cli {
std::string plan_label(const plan::Plan& p) {
  if (p.is_op_level()) {
    std::size_t placed = 0, split = 0;
    for (const auto& g : p.op_groups) {
      placed += g.mode == plan::GroupMode::place;
      split += g.mode == plan::GroupMode::split;
    }
    return fmt::format(
        "{} op groups ({} placed{}), {} micro-batches, order {}, recompute {}, zero {}",
        p.op_groups.size(), placed, split > 0 ? fmt::format(", {} split", split) : std::string(),
        p.num_microbatches, plan::to_string(p.execution_order), cost::to_string(p.recompute),
        p.zero_stage);
  }
  std::size_t replicas = 0;
  for (const auto& st : p.stages) replicas += st.replicas.size();
  return fmt::format("{} stages, {} replicas, {} micro-batches, recompute {}, zero {}",
                     p.stages.size(), replicas, p.num_microbatches, cost::to_string(p.recompute),
                     p.zero_stage);
}

std::string gradient_transport_text(const plan::Plan& p, const sim::SimResult& r) {
  if (p.grad_priority == plan::GradPriority::none && p.multipath == plan::Multipath::ecmp)
    return "";
  std::string out = fmt::format("priority {}, multipath {}", plan::to_string(p.grad_priority),
                                plan::to_string(p.multipath));
  if (p.loss_bound > 0)
    out += fmt::format(", loss bound {:g}%: dropped {:.2f}% of the bytes ({:.3f}% of the squared "
                       "norm)",
                       100 * p.loss_bound, 100 * r.grad_dropped_fraction,
                       100 * r.grad_dropped_norm_fraction);
  return out;
}

namespace {

std::vector<ReportFrontierPoint> frontier_points(const search::FrontierResult* f,
                                                 const std::string& chosen) {
  std::vector<ReportFrontierPoint> out;
  if (!f) return out;
  for (const auto& e : f->points)
    out.push_back(
        {e.iteration_time_s, e.max_peak_bytes, plan_label(e.plan), e.fingerprint == chosen});
  return out;
}

}  // namespace

int write_plan_report(const std::string& file, const model::Model& m, const cluster::Cluster& c,
                      const search::SearchResult& res, const sim::SimResult& result,
                      const search::FrontierResult* frontier, const search::RentResult* rent) {
  ReportInput in{m, c, res.best.plan, result, {}, {}, 0, false, {}, {}, {}};
  in.title = fmt::format("hetplan plan: {} on {}", m.name, c.name);
  in.planner = res.planner;
  in.search_time_s = res.search_time_s;
  in.timed_out = res.timed_out;
  for (const auto& b : res.baselines) {
    ReportBaseline rb;
    rb.name = b.name;
    if (b.best.ok) rb.iteration_time_s = b.best.iteration_time_s;
    rb.fits = b.best.ok && b.best.fits;
    in.baselines.push_back(rb);
  }
  in.frontier = frontier_points(frontier, res.best.fingerprint);
  if (rent)
    for (int i = 0; i < static_cast<int>(rent->subsets.size()); ++i) {
      const auto& p = rent->subsets[i];
      in.rent.push_back({p.label, p.fits, p.iteration_time_s, p.price.value, p.per_iteration.value,
                         p.note, i == rent->chosen, i == rent->fastest});
    }
  return write_output_file(file, report_html(in)) ? 0 : 2;
}

int write_pareto_report(const std::string& file, const model::Model& m, const cluster::Cluster& c,
                        const search::FrontierResult& res) {
  const auto& best = res.points.front();
  sim::SimOptions opts;
  opts.record_events = true;
  auto r = sim::simulate(m, c, best.plan, opts);
  if (!r) return report_error(r.error().message);
  ReportInput in{m, c, best.plan, *r, {}, {}, 0, false, {}, {}, {}};
  in.title = fmt::format("hetplan pareto: {} on {}", m.name, c.name);
  in.planner = "ft";
  in.search_time_s = res.search_time_s;
  in.timed_out = res.timed_out;
  in.frontier = frontier_points(&res, best.fingerprint);
  return write_output_file(file, report_html(in)) ? 0 : 2;
}

}  // namespace hetplan::cli
