// Plan JSON, version 1. Written with a fixed key order (the order of the structs) and arrays of
// numbers on one line, so that plan files read well and diff well; read back with every field
// checked and every error naming the field path.
#include "hetplan/plan/plan_json.h"

#include <fmt/format.h>

#include <climits>
#include <cmath>
#include <initializer_list>

#include "hetplan/core/hash.h"
#include "hetplan/core/json_util.h"
#include "hetplan/core/nearest_name.h"
#include "validate_op_groups.h"

namespace hetplan::plan {
namespace {

using OJson = nlohmann::ordered_json;

constexpr int kVersion = 1;

// ---- writing ----

OJson replica_json(const Replica& r) {
  OJson j;
  j["devices"] = r.devices;
  j["tp_shares"] = r.tp_shares;
  j["batch_share"] = r.batch_share;
  return j;
}

OJson stage_json(const Stage& s) {
  OJson j;
  j["first_layer"] = s.first_layer;
  j["num_layers"] = s.num_layers;
  j["replicas"] = OJson::array();
  for (const Replica& r : s.replicas) j["replicas"].push_back(replica_json(r));
  return j;
}

OJson op_group_json(const OpGroup& g) {
  OJson j;
  j["ops"] = g.ops;
  j["mode"] = to_string(g.mode);
  j["devices"] = g.devices;
  if (!g.shares.empty()) j["shares"] = g.shares;
  if (!g.replica_sizes.empty()) j["replica_sizes"] = g.replica_sizes;
  if (!g.batch_shares.empty()) j["batch_shares"] = g.batch_shares;
  if (g.mode == GroupMode::split && g.sync != SyncMethod::all_reduce) j["sync"] = to_string(g.sync);
  if (g.mode == GroupMode::replicate) {
    j["sync"] = to_string(g.sync);
    if (g.algorithm != cost::Algorithm::automatic) j["algorithm"] = algorithm_name(g.algorithm);
    if (!g.servers.empty()) j["servers"] = g.servers;
  }
  return j;
}

OJson ordered_plan_json(const Plan& p) {
  OJson j;
  j["version"] = kVersion;
  j["model"] = p.model;
  j["cluster"] = p.cluster;
  j["planner"] = p.planner;
  j["global_batch"] = p.global_batch;
  j["num_microbatches"] = p.num_microbatches;
  j["schedule"] = to_string(p.schedule);
  j["recompute"] = recompute_name(p.recompute);
  // Written only for a fused core, so the plans written before it existed keep their files.
  if (p.attention != cost::Attention::plain) j["attention"] = attention_name(p.attention);
  if (p.precision) j["precision"] = precision_name(*p.precision);
  if (p.adam != cost::AdamKernels::fused) j["adam"] = adam_name(p.adam);
  if (p.loss != cost::Loss::unfused) j["loss"] = loss_name(p.loss);
  if (p.metrics != 0) j["metrics"] = p.metrics;
  if (p.overlap != Overlap::none) j["overlap"] = to_string(p.overlap);
  j["zero_stage"] = p.zero_stage;
  j["sequence_parallel"] = p.sequence_parallel;
  // Written only when the plan names a form, so plans that leave it to the cost model keep their
  // files (and fingerprints).
  if (p.uneven_collectives != UnevenCollectives::automatic)
    j["uneven_collectives"] = to_string(p.uneven_collectives);
  if (p.batch_norm != BatchNormStats::local) j["batch_norm"] = to_string(p.batch_norm);
  j["grad_bucket_bytes"] = p.grad_bucket_bytes;
  // DLCP's settings, written only when set, as the two above.
  if (p.grad_priority != GradPriority::none) j["grad_priority"] = to_string(p.grad_priority);
  if (p.loss_bound != 0) j["loss_bound"] = p.loss_bound;
  if (p.multipath != Multipath::ecmp) j["multipath"] = to_string(p.multipath);
  if (p.is_op_level()) {
    j["execution_order"] = to_string(p.execution_order);
    j["op_groups"] = OJson::array();
    for (const OpGroup& g : p.op_groups) j["op_groups"].push_back(op_group_json(g));
    return j;
  }
  j["stages"] = OJson::array();
  for (const Stage& s : p.stages) j["stages"].push_back(stage_json(s));
  j["op_overrides"] = OJson::array();
  for (const OpOverride& o : p.op_overrides)
    j["op_overrides"].push_back(OJson{{"ops", o.ops}, {"split", to_string(o.split)}});
  j["grad_sync"] = OJson::array();
  for (const GradSync& g : p.grad_sync)
    j["grad_sync"].push_back(OJson{{"ops", g.ops},
                                   {"method", to_string(g.method)},
                                   {"algorithm", algorithm_name(g.algorithm)},
                                   {"priority", g.priority}});
  return j;
}

bool is_scalar_array(const OJson& j) {
  if (!j.is_array() || j.empty()) return false;
  for (const OJson& e : j)
    if (e.is_structured()) return false;
  return true;
}

// Like dump(2), but arrays of scalars stay on one line ("devices": [0, 1, 2, 3]).
void pretty(const OJson& j, int indent, std::string& out) {
  const std::string pad(static_cast<std::size_t>(indent) + 2, ' ');
  const std::string close_pad(static_cast<std::size_t>(indent), ' ');
  if (j.is_object() && !j.empty()) {
    out += "{\n";
    std::size_t i = 0;
    for (auto it = j.begin(); it != j.end(); ++it, ++i) {
      out += pad + OJson(it.key()).dump() + ": ";
      pretty(it.value(), indent + 2, out);
      out += i + 1 < j.size() ? ",\n" : "\n";
    }
    out += close_pad + "}";
  } else if (is_scalar_array(j)) {
    out += "[";
    for (std::size_t i = 0; i < j.size(); ++i) {
      if (i) out += ", ";
      out += j[i].dump();
    }
    out += "]";
  } else if (j.is_array() && !j.empty()) {
    out += "[\n";
    for (std::size_t i = 0; i < j.size(); ++i) {
      out += pad;
      pretty(j[i], indent + 2, out);
      out += i + 1 < j.size() ? ",\n" : "\n";
    }
    out += close_pad + "]";
  } else {
    out += j.dump();
  }
}

// ---- reading ----

void reject_unknown_keys(const Json& obj, std::string_view path,
                         std::initializer_list<const char*> allowed) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    bool known = false;
    for (const char* a : allowed) known = known || it.key() == a;
    if (known) continue;
    std::string list;
    for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
    throw InputError(
        field_path(path, it.key()),
        fmt::format("unknown key{} (allowed: {})", did_you_mean(it.key(), allowed), list));
  }
}

void require_object(const Json& j, const std::string& path) {
  if (!j.is_object()) throw InputError(path, "expected an object");
}

long long int_in(const Json& obj, std::string_view key, std::string_view path, long long lo,
                 long long hi, const std::string& expected) {
  const Json& v = json_require(obj, key, path);
  if (!v.is_number_integer()) throw InputError(field_path(path, key), expected);
  // Unsigned values beyond the signed range are out of range too.
  if (v.is_number_unsigned() && v.get<unsigned long long>() > static_cast<unsigned long long>(hi))
    throw InputError(field_path(path, key), expected);
  long long x = v.get<long long>();
  if (x < lo || x > hi) throw InputError(field_path(path, key), expected);
  return x;
}

long long int_in_or(const Json& obj, std::string_view key, std::string_view path, long long lo,
                    long long hi, const std::string& expected, long long dflt) {
  if (!obj.contains(key)) return dflt;
  return int_in(obj, key, path, lo, hi, expected);
}

template <class E, class FromString>
E enum_or(const Json& obj, std::string_view key, std::string_view path, E dflt, FromString parse,
          const std::string& names) {
  if (!obj.contains(key)) return dflt;
  const Json& v = obj.at(std::string(key));
  const std::string expected = fmt::format("expected one of {}", names);
  if (!v.is_string()) throw InputError(field_path(path, key), expected);
  auto e = parse(v.get<std::string>());
  if (!e)
    throw InputError(field_path(path, key),
                     fmt::format("{} (got \"{}\")", expected, v.get<std::string>()));
  return *e;
}

const Json& array_field(const Json& obj, std::string_view key, std::string_view path,
                        const std::string& expected) {
  const Json& v = json_require(obj, key, path);
  if (!v.is_array()) throw InputError(field_path(path, key), expected);
  return v;
}

std::vector<int> read_device_ids(const Json& obj, std::string_view key, const std::string& path,
                                 bool required) {
  const std::string expected = "expected a non-empty array of device ids";
  if (!required && !obj.contains(key)) return {};
  const Json& devs = array_field(obj, key, path, expected);
  if (devs.empty()) throw InputError(field_path(path, key), expected);
  const std::string dpath = field_path(path, key);
  std::vector<int> out;
  for (std::size_t i = 0; i < devs.size(); ++i) {
    const Json& d = devs[i];
    bool ok = d.is_number_integer() && d.get<long long>() >= 0 &&
              !(d.is_number_unsigned() && d.get<unsigned long long>() > INT_MAX) &&
              d.get<long long>() <= INT_MAX;
    if (!ok) throw InputError(index_path(dpath, i), "expected a device id (an integer >= 0)");
    out.push_back(static_cast<int>(d.get<long long>()));
  }
  return out;
}

std::vector<double> read_shares(const Json& obj, std::string_view key, const std::string& path) {
  std::vector<double> out;
  if (!obj.contains(key)) return out;
  const Json& shares = obj.at(std::string(key));
  const std::string spath = field_path(path, key);
  if (!shares.is_array())
    throw InputError(spath, "expected an array of positive numbers (or [] for even shares)");
  for (std::size_t i = 0; i < shares.size(); ++i) {
    const Json& s = shares[i];
    if (!s.is_number() || !(s.get<double>() > 0) || !std::isfinite(s.get<double>()))
      throw InputError(index_path(spath, i), "expected a number > 0");
    out.push_back(s.get<double>());
  }
  return out;
}

Replica read_replica(const Json& j, const std::string& path) {
  require_object(j, path);
  reject_unknown_keys(j, path, {"devices", "tp_shares", "batch_share"});
  Replica r;
  r.devices = read_device_ids(j, "devices", path, true);
  r.tp_shares = read_shares(j, "tp_shares", path);
  const Json& bs = json_require(j, "batch_share", path);
  if (!bs.is_number() || !(bs.get<double>() > 0 && bs.get<double>() <= 1))
    throw InputError(field_path(path, "batch_share"), "expected a number in (0, 1]");
  r.batch_share = bs.get<double>();
  return r;
}

Stage read_stage(const Json& j, const std::string& path) {
  require_object(j, path);
  reject_unknown_keys(j, path, {"first_layer", "num_layers", "replicas"});
  Stage s;
  s.first_layer =
      static_cast<int>(int_in(j, "first_layer", path, 0, INT_MAX, "expected an integer >= 0"));
  s.num_layers =
      static_cast<int>(int_in(j, "num_layers", path, 1, INT_MAX, "expected an integer >= 1"));
  const Json& reps = array_field(j, "replicas", path, "expected a non-empty array of replicas");
  if (reps.empty())
    throw InputError(field_path(path, "replicas"), "expected a non-empty array of replicas");
  const std::string rpath = field_path(path, "replicas");
  for (std::size_t i = 0; i < reps.size(); ++i)
    s.replicas.push_back(read_replica(reps[i], index_path(rpath, i)));
  return s;
}

OpGroup read_op_group(const Json& j, const std::string& path) {
  require_object(j, path);
  reject_unknown_keys(j, path,
                      {"ops", "mode", "devices", "shares", "replica_sizes", "batch_shares", "sync",
                       "algorithm", "servers"});
  OpGroup g;
  const std::string expected = "expected a non-empty array of op names or patterns";
  const Json& ops = array_field(j, "ops", path, expected);
  if (ops.empty()) throw InputError(field_path(path, "ops"), expected);
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (!ops[i].is_string() || ops[i].get<std::string>().empty())
      throw InputError(index_path(field_path(path, "ops"), i),
                       "expected a non-empty op name or pattern (\"layers.3.*\")");
    g.ops.push_back(ops[i].get<std::string>());
  }
  g.mode =
      enum_or(j, "mode", path, GroupMode::replicate, group_mode_from_string, group_mode_names());
  g.devices = read_device_ids(j, "devices", path, true);
  g.shares = read_shares(j, "shares", path);
  if (j.contains("replica_sizes")) {
    const std::string rpath = field_path(path, "replica_sizes");
    const Json& sizes = j.at("replica_sizes");
    if (!sizes.is_array()) throw InputError(rpath, "expected an array of integers >= 1");
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      if (!sizes[i].is_number_integer() || sizes[i].get<long long>() < 1 ||
          sizes[i].get<long long>() > INT_MAX)
        throw InputError(index_path(rpath, i), "expected an integer >= 1");
      g.replica_sizes.push_back(static_cast<int>(sizes[i].get<long long>()));
    }
  }
  g.batch_shares = read_shares(j, "batch_shares", path);
  g.sync = enum_or(j, "sync", path, SyncMethod::all_reduce, sync_method_from_string,
                   sync_method_names());
  g.algorithm = enum_or(j, "algorithm", path, cost::Algorithm::automatic, algorithm_from_string,
                        algorithm_names());
  g.servers = read_device_ids(j, "servers", path, false);
  if (g.mode != GroupMode::split)
    for (const char* key : {"replica_sizes", "batch_shares"})
      if (j.contains(key))
        throw InputError(
            field_path(path, key),
            "applies to split groups only (their replicas of tensor-parallel devices)");
  if (g.mode == GroupMode::place)
    for (const char* key : {"sync", "algorithm", "servers"})
      if (j.contains(key))
        throw InputError(field_path(path, key),
                         "a placed group runs on one device and synchronises nothing");
  if (g.mode == GroupMode::split)
    for (const char* key : {"algorithm", "servers"})
      if (j.contains(key)) throw InputError(field_path(path, key), detail::kSplitGroupSettings);
  return g;
}

std::string read_pattern(const Json& obj, std::string_view path, const char* dflt) {
  const std::string expected = "expected a non-empty op name or pattern (\"layers.3.*\")";
  if (dflt && !obj.contains("ops")) return dflt;
  const Json& v = json_require(obj, "ops", path);
  if (!v.is_string() || v.get<std::string>().empty())
    throw InputError(field_path(path, "ops"), expected);
  return v.get<std::string>();
}

OpOverride read_override(const Json& j, const std::string& path) {
  require_object(j, path);
  reject_unknown_keys(j, path, {"ops", "split"});
  OpOverride o;
  o.ops = read_pattern(j, path, nullptr);
  o.split =
      enum_or(j, "split", path, SplitKind::tensor, split_kind_from_string, split_kind_names());
  return o;
}

GradSync read_grad_sync(const Json& j, const std::string& path) {
  require_object(j, path);
  reject_unknown_keys(j, path, {"ops", "method", "algorithm", "priority"});
  GradSync g;
  g.ops = read_pattern(j, path, "*");
  g.method = enum_or(j, "method", path, SyncMethod::all_reduce, sync_method_from_string,
                     sync_method_names());
  g.algorithm = enum_or(j, "algorithm", path, cost::Algorithm::automatic, algorithm_from_string,
                        algorithm_names());
  g.priority =
      static_cast<int>(int_in_or(j, "priority", path, INT_MIN, INT_MAX, "expected an integer", 0));
  return g;
}

Plan read_plan(const Json& doc) {
  if (!doc.is_object()) throw InputError("expected a JSON object at the top level");
  reject_unknown_keys(doc, "",
                      {"version",
                       "model",
                       "cluster",
                       "planner",
                       "global_batch",
                       "num_microbatches",
                       "schedule",
                       "recompute",
                       "attention",
                       "precision",
                       "adam",
                       "loss",
                       "metrics",
                       "overlap",
                       "zero_stage",
                       "sequence_parallel",
                       "uneven_collectives",
                       "batch_norm",
                       "grad_bucket_bytes",
                       "grad_priority",
                       "loss_bound",
                       "multipath",
                       "stages",
                       "op_overrides",
                       "grad_sync",
                       "op_groups",
                       "execution_order"});
  json_require_version(doc, kVersion, "");
  Plan p;
  p.model = json_string_or(doc, "model", "", "");
  p.cluster = json_string_or(doc, "cluster", "", "");
  p.planner = json_string_or(doc, "planner", "", "");
  p.global_batch = int_in(doc, "global_batch", "", 1, kMaxGlobalBatch,
                          fmt::format("expected an integer in 1..{}", kMaxGlobalBatch));
  p.num_microbatches =
      static_cast<int>(int_in_or(doc, "num_microbatches", "", 1, kMaxMicrobatches,
                                 fmt::format("expected an integer in 1..{}", kMaxMicrobatches), 1));
  p.schedule =
      enum_or(doc, "schedule", "", Schedule::one_f_one_b, schedule_from_string, schedule_names());
  p.recompute = enum_or(doc, "recompute", "", cost::Recompute::none, recompute_from_string,
                        recompute_names());
  p.attention = enum_or(doc, "attention", "", cost::Attention::plain, attention_from_string,
                        attention_names());
  if (doc.contains("precision"))
    p.precision =
        enum_or(doc, "precision", "", model::DType::bf16, precision_from_string, precision_names());
  p.adam = enum_or(doc, "adam", "", cost::AdamKernels::fused, adam_from_string, adam_names());
  p.loss = enum_or(doc, "loss", "", cost::Loss::unfused, loss_from_string, loss_names());
  p.metrics =
      static_cast<int>(int_in_or(doc, "metrics", "", 0, kMaxMetrics,
                                 fmt::format("expected an integer in 0..{}", kMaxMetrics), 0));
  p.overlap = enum_or(doc, "overlap", "", Overlap::none, overlap_from_string, overlap_names());
  p.zero_stage =
      static_cast<int>(int_in_or(doc, "zero_stage", "", 0, 3, "expected an integer in 0..3", 0));
  p.sequence_parallel = json_bool_or(doc, "sequence_parallel", "", false);
  p.uneven_collectives = enum_or(doc, "uneven_collectives", "", UnevenCollectives::automatic,
                                 uneven_collectives_from_string, uneven_collectives_names());
  p.batch_norm = enum_or(doc, "batch_norm", "", BatchNormStats::local, batch_norm_from_string,
                         batch_norm_names());
  if (doc.contains("grad_bucket_bytes")) {
    const Json& v = doc.at("grad_bucket_bytes");
    if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>()))
      throw InputError("grad_bucket_bytes", "expected a number > 0");
    p.grad_bucket_bytes = v.get<double>();
  }
  p.grad_priority = enum_or(doc, "grad_priority", "", GradPriority::none,
                            grad_priority_from_string, grad_priority_names());
  if (doc.contains("loss_bound")) {
    const Json& v = doc.at("loss_bound");
    if (!v.is_number() || !(v.get<double>() >= 0 && v.get<double>() <= kMaxLossBound))
      throw InputError("loss_bound", fmt::format("expected a number in [0, {:g}] (the fraction of "
                                                 "gradient bytes that may be dropped)",
                                                 kMaxLossBound));
    p.loss_bound = v.get<double>();
  }
  p.multipath =
      enum_or(doc, "multipath", "", Multipath::ecmp, multipath_from_string, multipath_names());
  if (doc.contains("op_groups")) {
    for (const char* key : {"stages", "op_overrides", "grad_sync"})
      if (doc.contains(key))
        throw InputError(key,
                         "an op-level plan (with op_groups) has no stages, op_overrides or "
                         "grad_sync (expected one of op_groups and stages)");
    const Json& groups =
        array_field(doc, "op_groups", "", "expected a non-empty array of op groups");
    if (groups.empty()) throw InputError("op_groups", "expected a non-empty array of op groups");
    for (std::size_t i = 0; i < groups.size(); ++i)
      p.op_groups.push_back(read_op_group(groups[i], index_path("op_groups", i)));
    p.execution_order = enum_or(doc, "execution_order", "", ExecutionOrder::heft,
                                execution_order_from_string, execution_order_names());
    return p;
  }
  if (doc.contains("execution_order"))
    throw InputError("execution_order", "applies to op-level plans only (expected op_groups)");
  const Json& stages = array_field(doc, "stages", "", "expected a non-empty array of stages");
  if (stages.empty()) throw InputError("stages", "expected a non-empty array of stages");
  for (std::size_t i = 0; i < stages.size(); ++i)
    p.stages.push_back(read_stage(stages[i], index_path("stages", i)));
  if (doc.contains("op_overrides")) {
    const Json& a = array_field(doc, "op_overrides", "", "expected an array of {ops, split}");
    for (std::size_t i = 0; i < a.size(); ++i)
      p.op_overrides.push_back(read_override(a[i], index_path("op_overrides", i)));
  }
  if (doc.contains("grad_sync")) {
    const Json& a = array_field(doc, "grad_sync", "",
                                "expected an array of {ops, method, algorithm, priority}");
    for (std::size_t i = 0; i < a.size(); ++i)
      p.grad_sync.push_back(read_grad_sync(a[i], index_path("grad_sync", i)));
  }
  return p;
}

// "[json.exception.parse_error.101] parse error at line 2, column 5: ..." -> "parse error at ...".
std::string strip_exception_id(const std::string& what) {
  if (!what.empty() && what.front() == '[') {
    auto close = what.find("] ");
    if (close != std::string::npos) return what.substr(close + 2);
  }
  return what;
}

}  // namespace

nlohmann::json to_json(const Plan& p) { return nlohmann::json(ordered_plan_json(p)); }

std::string to_json_text(const Plan& p) {
  std::string out;
  pretty(ordered_plan_json(p), 0, out);
  out += '\n';
  return out;
}

Result<Plan> plan_from_json(const nlohmann::json& doc, const std::string& source) {
  return capture_errors(source, [&] { return read_plan(doc); });
}

Result<Plan> read_plan_file(const std::string& file) {
  std::string text;
  try {
    text = read_text_file(file);  // its errors already name the file
  } catch (const std::exception& e) {
    return Error{e.what()};
  }
  Json doc;
  try {
    doc = parse_json_unique_keys(text);
  } catch (const InputError& e) {
    return make_error(file, "", e.what());
  } catch (const Json::parse_error& e) {
    return make_error(file, "", "invalid JSON: " + strip_exception_id(e.what()));
  } catch (const std::exception& e) {
    return make_error(file, "", "invalid JSON: " + strip_exception_id(e.what()));
  }
  return plan_from_json(doc, file);
}

std::string plan_fingerprint(const Plan& p) { return fingerprint_hex(to_json(p).dump()); }

}  // namespace hetplan::plan
