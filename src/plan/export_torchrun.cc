// A plan as a torchrun launch of hetplan's own runtime: one torchrun per node, each worker
// `hetplan run` of the plan as written, its rank counted node by node (--ranks-by-device).
#include <fmt/format.h>

#include "export_parts.h"
#include "hetplan/plan/gpu_precision.h"
#include "hetplan/plan/plan_json.h"

namespace hetplan::plan::detail {

Result<Exported> export_torchrun(const Plan& p, const model::Model& m, const cluster::Cluster& c,
                                 const ExportInputs& in) {
  Exported out;
  const bool gpus = has_gpus(c);
  // The arithmetic the workers train in: on GPUs the plan's precision or the model's dtype (the
  // model is built in the plan's), on CPUs the plan's precision or fp32 (hetplan run's default).
  // bf16 on a type without BF16 becomes fp16 under loss scaling, and fp16 runs on CUDA only.
  model::DType dtype = gpus ? m.dtype : p.precision.value_or(model::DType::fp32);
  if (gpus && dtype == model::DType::bf16) {
    if (const GpuPrecision on = gpu_precision(p, m, c); on.dtype != dtype) {
      dtype = on.dtype;
      out.differences.push_back(fmt::format(
          "the model computes in bf16: {}; written: fp16 (under dynamic loss scaling)", on.why));
    }
  }
  if (dtype == model::DType::fp16 && !gpus) {
    dtype = model::DType::fp32;
    out.differences.push_back(
        fmt::format("precision fp16: hetplan's runtime runs it on CUDA only; written: fp32"));
  }
  // A plan that names its precision carries it (what `run` takes); else the flag says it.
  Plan written = p;
  std::string precision;
  if (p.precision)
    written.precision = dtype;
  else if (dtype != model::DType::fp32)
    precision = fmt::format(" --precision {}", model::to_string(dtype));
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
  out.files.push_back({in.plan_file, to_json_text(written), false});
  return out;
}

}  // namespace hetplan::plan::detail
