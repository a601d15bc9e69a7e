// Calibration profiles (JSON, version 2): measured op times per device type and op kind, and the
// optional "messaging", "optimizer" and "host" sections (compute_cost.h).
//
//   {"version": 2, "device": "H100-SXM5-80GB", "measured_on": "2026-11-22", "notes": "...",
//    "entries": [{"device": "H100-SXM5-80GB", "op_kind": "matmul",
//                 "points": [{"flops": 1.1e9, "bytes": 6.3e6, "seconds": 2.1e-6}, ...]}]}
#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <cmath>

#include "hetplan/core/json_util.h"
#include "hetplan/cost/compute_cost.h"
#include "hetplan/cost/op_kinds.h"

namespace hetplan::cost {
namespace {

double size_key(const CalibrationPoint& p, bool gemm) { return gemm ? p.flops : p.bytes; }

// Calls f(entry, path, device) for each entry of `array` (named `key` in errors): an object whose
// "device" defaults to the profile's.
template <class F>
void for_each_entry(const Json& array, const std::string& key, const std::string& profile_device,
                    F&& f) {
  for (std::size_t i = 0; i < array.size(); ++i) {
    const std::string path = index_path(key, i);
    const Json& e = array[i];
    if (!e.is_object()) throw InputError(path, "expected an object");
    const std::string device = json_string_or(e, "device", path, profile_device);
    if (device.empty()) throw InputError(field_path(path, "device"), "expected a device type name");
    f(e, path, device);
  }
}

// Calls f(point, path) for each object of the entry's non-empty "points" array.
template <class F>
void for_each_point(const Json& entry, const std::string& path, F&& f) {
  const std::string points_path = field_path(path, "points");
  const Json& pts = json_require(entry, "points", path);
  if (!pts.is_array() || pts.empty()) throw InputError(points_path, "expected a non-empty array");
  for (std::size_t j = 0; j < pts.size(); ++j) {
    const std::string pp = index_path(points_path, j);
    if (!pts[j].is_object()) throw InputError(pp, "expected an object");
    f(pts[j], pp);
  }
}

CalibrationProfile parse_profile(const Json& doc) {
  if (!doc.is_object()) throw InputError("document", "expected a JSON object");
  // Version 1 filed a batched_matmul point as a batch of 8 matrices (version 2: one matrix) and
  // had no messaging: its batched GEMMs would be priced several times too slow.
  if (doc.contains("version") && doc.at("version") == 1)
    throw InputError("version",
                     "expected 2 (a version 1 profile files batched GEMMs per batch of 8 "
                     "matrices; run hetplan calibrate again)");
  json_refuse_unknown_keys(
      doc, "",
      {"version", "device", "measured_on", "notes", "entries", "messaging", "optimizer", "host"});
  json_require_version(doc, 2, "");
  CalibrationProfile prof;
  prof.device = json_string(doc, "device", "");
  if (prof.device.empty()) throw InputError("device", "expected a device type name");
  prof.measured_on = json_string_or(doc, "measured_on", "", "");
  prof.notes = json_string_or(doc, "notes", "", "");
  const Json& entries = json_require(doc, "entries", "");
  if (!entries.is_array()) throw InputError("entries", "expected an array");
  for_each_entry(
      entries, "entries", prof.device,
      [&](const Json& e, const std::string& path, const std::string& device) {
        json_refuse_unknown_keys(e, path, {"device", "op_kind", "points"});
        const std::string kind_name = json_string(e, "op_kind", path);
        const auto kind = model::parse_op_kind(kind_name);
        if (!kind) {
          std::string known;
          for (model::OpKind k : kAllOpKinds)
            known += (known.empty() ? "" : ", ") + std::string(model::to_string(k));
          throw InputError(
              field_path(path, "op_kind"),
              fmt::format("unknown op kind '{}' (expected one of {})", kind_name, known));
        }
        const bool gemm = is_gemm_like(*kind);
        auto& out = prof.points[device][*kind];
        for_each_point(e, path, [&](const Json& pt, const std::string& pp) {
          json_refuse_unknown_keys(pt, pp, {"flops", "bytes", "seconds"});
          CalibrationPoint p;
          p.flops = json_number_or(pt, "flops", pp, 0);
          p.bytes = json_number_or(pt, "bytes", pp, 0);
          p.seconds = json_number(pt, "seconds", pp);
          if (p.flops < 0) throw InputError(field_path(pp, "flops"), "expected a number >= 0");
          if (p.bytes < 0) throw InputError(field_path(pp, "bytes"), "expected a number >= 0");
          if (!(p.seconds > 0))
            throw InputError(field_path(pp, "seconds"), "expected a number > 0");
          if (!(size_key(p, gemm) > 0))
            throw InputError(field_path(pp, gemm ? "flops" : "bytes"),
                             fmt::format("expected a number > 0 (points of {} are keyed by {})",
                                         kind_name, gemm ? "flops" : "bytes"));
          out.push_back(p);
        });
      });
  // Sections of {"device", "points": [{<size>, "seconds"}]} entries, both numbers > 0.
  auto read_sized = [&](const char* section, const char* size_field, auto add) {
    if (!doc.contains(section)) return;
    const Json& arr = doc.at(section);
    if (!arr.is_array()) throw InputError(section, "expected an array");
    for_each_entry(arr, section, prof.device,
                   [&](const Json& e, const std::string& path, const std::string& device) {
                     json_refuse_unknown_keys(e, path, {"device", "points"});
                     for_each_point(e, path, [&](const Json& pt, const std::string& pp) {
                       json_refuse_unknown_keys(pt, pp, {size_field, "seconds"});
                       const double size = json_number(pt, size_field, pp);
                       const double seconds = json_number(pt, "seconds", pp);
                       if (!(size > 0))
                         throw InputError(field_path(pp, size_field), "expected a number > 0");
                       if (!(seconds > 0))
                         throw InputError(field_path(pp, "seconds"), "expected a number > 0");
                       add(device, size, seconds);
                     });
                   });
  };
  read_sized("messaging", "bytes", [&](const std::string& device, double bytes, double seconds) {
    prof.messaging[device].push_back({bytes, seconds});
  });
  read_sized("optimizer", "params", [&](const std::string& device, double params, double seconds) {
    prof.optimizer[device].push_back({0, params, seconds});
  });
  if (doc.contains("host")) {
    const Json& arr = doc.at("host");
    if (!arr.is_array()) throw InputError("host", "expected an array");
    for_each_entry(
        arr, "host", prof.device,
        [&](const Json& e, const std::string& path, const std::string& device) {
          json_refuse_unknown_keys(e, path, {"device", "forward_seconds", "backward_seconds"});
          auto positive = [&](const char* field) {
            const double v = json_number(e, field, path);
            if (!(v > 0)) throw InputError(field_path(path, field), "expected a number > 0");
            return v;
          };
          HostOpTimes h;
          h.forward_seconds = positive("forward_seconds");
          h.backward_seconds = positive("backward_seconds");
          if (!prof.host.emplace(device, h).second)
            throw InputError(path, fmt::format("a second entry for device '{}'", device));
        });
  }
  auto by_size = [](const auto& a, const auto& b) { return a.bytes < b.bytes; };
  for (auto& [device, pts] : prof.messaging) std::stable_sort(pts.begin(), pts.end(), by_size);
  for (auto& [device, pts] : prof.optimizer) std::stable_sort(pts.begin(), pts.end(), by_size);
  for (auto& [device, kinds] : prof.points)
    for (auto& [kind, pts] : kinds) {
      const bool gemm = is_gemm_like(kind);
      std::stable_sort(pts.begin(), pts.end(),
                       [gemm](const CalibrationPoint& a, const CalibrationPoint& b) {
                         return size_key(a, gemm) < size_key(b, gemm);
                       });
    }
  return prof;
}

}  // namespace

Result<CalibrationProfile> parse_calibration_profile(const std::string& json_text,
                                                     const std::string& source) {
  return capture_errors(source, [&] {
    Json doc;
    try {
      doc = parse_json_unique_keys(json_text);
    } catch (const Json::parse_error& e) {
      throw InputError(fmt::format("not valid JSON ({})", e.what()));
    }
    return parse_profile(doc);
  });
}

Result<CalibrationProfile> read_calibration_profile(const std::string& file) {
  std::string text;
  try {
    text = read_text_file(file);
  } catch (const InputError& e) {
    return Error{e.what()};  // already names the file
  }
  return parse_calibration_profile(text, file);
}

std::string calibration_profile_to_json(const CalibrationProfile& p) {
  Json doc = Json::object();
  doc["version"] = 2;
  doc["device"] = p.device;
  doc["measured_on"] = p.measured_on;
  doc["notes"] = p.notes;
  Json entries = Json::array();
  for (const auto& [device, kinds] : p.points)
    for (const auto& [kind, pts] : kinds) {
      Json e = Json::object();
      e["device"] = device;
      e["op_kind"] = model::to_string(kind);
      Json arr = Json::array();
      for (const CalibrationPoint& pt : pts)
        arr.push_back(Json{{"flops", pt.flops}, {"bytes", pt.bytes}, {"seconds", pt.seconds}});
      e["points"] = std::move(arr);
      entries.push_back(std::move(e));
    }
  doc["entries"] = std::move(entries);
  auto write_sized = [&](const char* section, const char* size_field, const auto& by_device,
                         auto size_of) {
    if (by_device.empty()) return;
    Json arr = Json::array();
    for (const auto& [device, pts] : by_device) {
      Json points = Json::array();
      for (const auto& pt : pts)
        points.push_back(Json{{size_field, size_of(pt)}, {"seconds", pt.seconds}});
      arr.push_back(Json{{"device", device}, {"points", std::move(points)}});
    }
    doc[section] = std::move(arr);
  };
  write_sized("messaging", "bytes", p.messaging, [](const MessagingPoint& pt) { return pt.bytes; });
  write_sized("optimizer", "params", p.optimizer,
              [](const CalibrationPoint& pt) { return pt.bytes; });
  if (!p.host.empty()) {
    Json arr = Json::array();
    for (const auto& [device, h] : p.host)
      arr.push_back(Json{{"device", device},
                         {"forward_seconds", h.forward_seconds},
                         {"backward_seconds", h.backward_seconds}});
    doc["host"] = std::move(arr);
  }
  return doc.dump(2) + "\n";
}

Seconds interpolate_calibrated_time(const std::vector<CalibrationPoint>& points, model::OpKind kind,
                                    double flops, double bytes, double floor_share) {
  assert(!points.empty());
  const bool gemm = is_gemm_like(kind);
  const double size = gemm ? flops : bytes;
  if (size <= 0) return Seconds(0);
  auto rate_at = [&](std::size_t i) { return size_key(points[i], gemm) / points[i].seconds; };
  double rate = 0;
  if (size <= size_key(points.front(), gemm)) {
    // The smallest point's time is its kernels' fixed cost: this pass's part of it at least.
    return Seconds(std::max(size / rate_at(0), floor_share * points.front().seconds));
  } else if (size >= size_key(points.back(), gemm)) {
    rate = rate_at(points.size() - 1);
  } else {
    // First point with key >= size; its predecessor has key < size, so the two keys differ.
    const auto hi =
        static_cast<std::size_t>(std::lower_bound(points.begin(), points.end(), size,
                                                  [gemm](const CalibrationPoint& p, double s) {
                                                    return size_key(p, gemm) < s;
                                                  }) -
                                 points.begin());
    const std::size_t lo = hi - 1;
    const double x0 = std::log(size_key(points[lo], gemm));
    const double x1 = std::log(size_key(points[hi], gemm));
    const double t = (std::log(size) - x0) / (x1 - x0);
    rate = rate_at(lo) + t * (rate_at(hi) - rate_at(lo));
  }
  return Seconds(size / rate);
}

}  // namespace hetplan::cost
