#include "hetplan/model/zoo.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "family_specs.h"
#include "hetplan/model/graph_json.h"
#include "hetplan/model/onnx_import.h"

namespace hetplan::model {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

Model build_from_spec(std::string_view text, std::optional<DType> dtype) {
  const std::size_t colon = text.find(':');
  const std::string_view head = trim(text.substr(0, colon));
  const std::string_view rest =
      colon == std::string_view::npos ? std::string_view{} : text.substr(colon + 1);
  std::optional<Model> m;
  if (const PresetInfo* p = find_preset(head)) {
    const std::size_t pc = p->spec.find(':');
    detail::SpecArgs args(std::string(head), std::string_view(p->spec).substr(pc + 1), rest);
    if (dtype) args.set("dtype", to_string(*dtype));
    m = detail::build_family(std::string_view(p->spec).substr(0, pc), args);
  } else {
    detail::SpecArgs args(std::string(head), rest);
    if (dtype) args.set("dtype", to_string(*dtype));
    m = detail::build_family(head, args);
  }
  // "bert-base,dtype=bf16": a preset's keys follow a colon.
  const std::size_t comma = head.find(',');
  const std::string_view before = trim(head.substr(0, comma));
  if (!m && comma != std::string_view::npos && find_preset(before))
    throw InputError(fmt::format("'{}'", head),
                     fmt::format("expected a preset's keys after a colon ({}:{})", before,
                                 head.substr(comma + 1)));
  if (!m)
    throw InputError(
        fmt::format("'{}'", head),
        fmt::format("expected a preset name (such as gpt3-1.3b; `hetplan models` lists them), a "
                    "family spec ({}:key=value,...) or a .json graph file",
                    fmt::join(model_families(), ":..., ")));
  m->name = std::string(text);
  return std::move(*m);
}

}  // namespace

const std::vector<std::string>& model_families() { return detail::family_names(); }

namespace {

Result<Model> load(std::string_view text, std::string_view source, std::optional<DType> dtype) {
  const std::string_view t = trim(text);
  if (t.size() >= 5 && t.substr(t.size() - 5) == ".json") {
    auto m = read_model_file(std::string(t));
    // fp32 and tf32 hold the same bytes: the graph serves either, relabelled.
    const auto same_bytes = [](DType a, DType b) {
      return (a == DType::fp32 || a == DType::tf32) && (b == DType::fp32 || b == DType::tf32);
    };
    if (m && dtype && same_bytes(m->dtype, *dtype)) m->dtype = *dtype;
    if (m && dtype && m->dtype != *dtype)
      return Error{fmt::format(
          "{}: dtype: the graph is costed in {} (its byte counts are that dtype's); expected {} "
          "for precision={} (write the graph in {})",
          t, to_string(m->dtype), to_string(*dtype), to_string(*dtype), to_string(*dtype))};
    return m;
  }
  if (auto onnx = parse_onnx_spec(t)) {
    if (!*onnx) return make_error(std::string(source), "", onnx->error().message);
    if (dtype) (*onnx)->second.dtype = *dtype;
    auto r = read_onnx_file((*onnx)->first, (*onnx)->second);
    if (!r) return r.error();
    for (const std::string& w : r->warnings) fmt::print(stderr, "warning: {}\n", w);
    r->model.name = std::string(t);
    return std::move(r->model);
  }
  if (t.empty())
    return make_error(std::string(source), "",
                      "expected a model: a preset name, a family spec or a .json graph file");
  return capture_errors(std::string(source), [&] { return build_from_spec(t, dtype); });
}

}  // namespace

Result<Model> load_model(std::string_view text, std::string_view source) {
  return load(text, source, std::nullopt);
}

Result<Model> load_model(std::string_view text, std::string_view source, DType dtype) {
  return load(text, source, dtype);
}

}  // namespace hetplan::model
