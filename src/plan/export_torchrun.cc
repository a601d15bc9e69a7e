// A plan as a torchrun launch of hetplan's own runtime: one torchrun per node, each worker
// `hetplan run` of the plan as written, its rank counted node by node (--ranks-by-device).
#include <fmt/format.h>

#include "export_parts.h"
#include "hetplan/plan/plan_json.h"

namespace hetplan::plan::detail {

Result<Exported> export_torchrun(const Plan& p, const model::Model& m, const cluster::Cluster& c,
                                 const ExportInputs& in) {
  Exported out;
  const bool gpus = has_gpus(c);
  std::string precision;
  if (m.dtype == model::DType::bf16 && gpus) {
    const auto lacking = types_without_bf16(p, c);
    if (p.is_op_level())
      out.differences.push_back(
          "the model computes in bf16: hetplan's runtime runs op-level plans in fp32");
    else if (!lacking.empty())
      out.differences.push_back(fmt::format(
          "the model computes in bf16: {} {} no BF16 arithmetic and hetplan's runtime has no fp16 "
          "mode; written: fp32",
          fmt::join(lacking, ", "), lacking.size() == 1 ? "has" : "have"));
    else
      precision = " --precision bf16";
  }
  add_overlap_difference(p, "hetplan's runtime", out.differences);
  const auto nodes = launch_nodes(devices_node_by_node(p, c), c);
  std::string s = launch_preamble(
      fmt::format("torchrun launch of hetplan's runtime for {} (written by hetplan export)",
                  plan_title(p, m, c)),
      out.differences, nodes, c, in.master_port);
  s += "# hetplan's executable, and where the plan's ranks run (cuda: one GPU per worker).\n";
  s += "HETPLAN=\"${HETPLAN:-hetplan}\"\n";
  s += fmt::format("HETPLAN_DEVICE=\"${{HETPLAN_DEVICE:-{}}}\"\n", gpus ? "cuda" : "cpu");
  s += "HERE=\"$(cd \"$(dirname \"$0\")\" && pwd)\"\n";
  s += fmt::format(
      "exec {} --no_python \\\n  \"$HETPLAN\" run --plan \"$HERE/{}\" --model {} --cluster "
      "{} \\\n  --ranks-by-device --device \"$HETPLAN_DEVICE\"{} \"$@\"\n",
      torchrun_arguments(), in.plan_file, shell_quote(in.model_spec), shell_quote(in.cluster_spec),
      precision);
  out.files.push_back({"torchrun.sh", s, true});
  out.files.push_back({in.plan_file, to_json_text(p), false});
  return out;
}

}  // namespace hetplan::plan::detail
