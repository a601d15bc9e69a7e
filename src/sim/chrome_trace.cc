#include "hetplan/sim/chrome_trace.h"

#include <nlohmann/json.hpp>

namespace hetplan::sim {

std::string chrome_trace_json(const SimResult& r) {
  using nlohmann::json;
  json events = json::array();
  for (std::size_t l = 0; l < r.lanes.size(); ++l) {
    events.push_back(
        {{"ph", "M"}, {"name", "process_name"}, {"pid", l}, {"args", {{"name", r.lanes[l].name}}}});
    events.push_back({{"ph", "M"},
                      {"name", "thread_name"},
                      {"pid", l},
                      {"tid", 0},
                      {"args", {{"name", "compute"}}}});
    events.push_back({{"ph", "M"},
                      {"name", "thread_name"},
                      {"pid", l},
                      {"tid", 1},
                      {"args", {{"name", "communication"}}}});
  }
  for (const TaskRecord& e : r.events) {
    const bool transfer = is_transfer(e.kind);
    std::string name = to_string(e.kind);
    if (e.microbatch >= 0) name += " mb" + std::to_string(e.microbatch);
    if (e.bucket >= 0) name += " bucket" + std::to_string(e.bucket);
    json args = {{"stage", e.stage}};
    if (e.peer_lane >= 0) args["to_lane"] = e.peer_lane;
    events.push_back({{"ph", "X"},
                      {"name", name},
                      {"cat", to_string(e.kind)},
                      {"pid", e.lane},
                      {"tid", transfer ? 1 : 0},
                      {"ts", e.start.value * 1e6},
                      {"dur", (e.end - e.start).value * 1e6},
                      {"args", args}});
  }
  json doc = {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  return doc.dump() + "\n";
}

}  // namespace hetplan::sim
