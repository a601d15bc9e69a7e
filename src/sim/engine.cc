// The discrete-event engine. Events sit in a binary heap keyed on (time, sequence number), so ties
// resolve in a fixed order. Transfers are flows: after their latency they move their bytes at a
// speed that every change in the set of flows on their links recomputes (each link's capacity goes
// to the flows of the highest priority first; flows of one priority share what is left in
// proportion to their demands; a flow goes as fast as its most loaded link allows).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <queue>
#include <utility>

#include "task_graph.h"

namespace hetplan::sim::detail {
namespace {

enum class EvType : std::uint8_t { compute_done, latency_done, flow_done };

struct Event {
  double time;
  std::uint64_t seq;
  int task;
  EvType type;
  std::uint32_t version;
  bool operator>(const Event& o) const { return time != o.time ? time > o.time : seq > o.seq; }
};

struct Flow {
  double remaining = 0;  // seconds of transfer left at full speed
  double speed = 1;      // fraction of full speed
  double last_update = 0;
  // Without priorities: the largest demand over capacity on the flow's links (at least 1; speed
  // is its inverse) and the link it comes from (-1 when it is 1).
  double load = 1;
  int bottleneck = -1;
  std::uint32_t version = 0;
};

class Engine {
 public:
  Engine(const TaskGraph& g, const std::vector<double>& cap)
      : g_(g),
        cap_(cap),
        preds_(g.tasks.size()),
        next_(g.streams.size(), 0),
        flows_(g.tasks.size()),
        link_demand_(cap.size(), 0.0),
        link_flows_(cap.size()),
        link_priority_demand_(cap.size()) {
    for (const Task& t : g.tasks) prioritised_ = prioritised_ || t.priority != 0;
    r_.start.assign(g.tasks.size(), -1);
    r_.end.assign(g.tasks.size(), -1);
    for (std::size_t i = 0; i < g.tasks.size(); ++i) preds_[i] = g.tasks[i].preds;
  }

  EngineResult run() {
    for (std::size_t s = 0; s < g_.streams.size(); ++s) try_start_stream(static_cast<int>(s));
    while (!heap_.empty()) {
      Event e = heap_.top();
      heap_.pop();
      ++r_.events;
      now_ = e.time;
      switch (e.type) {
        case EvType::compute_done:
          finish(e.task);
          break;
        case EvType::latency_done:
          begin_flow(e.task);
          break;
        case EvType::flow_done:
          if (e.version != flows_[e.task].version) break;  // superseded by a speed change
          end_flow(e.task);
          finish(e.task);
          break;
      }
    }
    for (double end : r_.end)
      if (end < 0) r_.deadlock = true;
    return std::move(r_);
  }

 private:
  void push(double t, int task, EvType type, std::uint32_t version = 0) {
    heap_.push(Event{t, seq_++, task, type, version});
  }

  void try_start_stream(int s) {
    const auto& order = g_.streams[s];
    const std::size_t i = next_[s];
    if (i >= order.size()) return;
    const int t = order[i];
    if (preds_[t] != 0 || r_.start[t] >= 0) return;
    start(t);
  }

  void start(int t) {
    const Task& task = g_.tasks[t];
    r_.start[t] = now_;
    if (!task.is_transfer) {
      push(now_ + task.duration, t, EvType::compute_done);
    } else {
      push(now_ + task.latency, t, EvType::latency_done);
    }
  }

  void finish(int t) {
    r_.end[t] = now_;
    r_.makespan = std::max(r_.makespan, now_);
    const Task& task = g_.tasks[t];
    ++next_[task.stream];
    try_start_stream(task.stream);
    for (int s : task.succs)
      if (--preds_[s] == 0) try_start_stream(g_.tasks[s].stream);
  }

  double demand(const Task& task, const cost::LinkLoad& l) const {
    return task.duration > 0 ? l.bytes / task.duration : 0.0;
  }

  void begin_flow(int t) {
    const Task& task = g_.tasks[t];
    if (task.duration <= 0 || task.loads_begin == task.loads_end) {
      finish(t);
      return;
    }
    Flow& f = flows_[t];
    f.remaining = task.duration;
    f.last_update = now_;
    f.speed = 1;
    for (int i = task.loads_begin; i < task.loads_end; ++i) {
      const auto& l = g_.loads[i];
      link_demand_[l.link] += demand(task, l);
      if (prioritised_) add_priority_demand(l.link, task.priority, demand(task, l));
      link_flows_[l.link].push_back(t);
    }
    update_neighbours(t, true);
    reschedule(t);
  }

  void end_flow(int t) {
    const Task& task = g_.tasks[t];
    for (int i = task.loads_begin; i < task.loads_end; ++i) {
      const auto& l = g_.loads[i];
      link_demand_[l.link] -= demand(task, l);
      if (prioritised_) add_priority_demand(l.link, task.priority, -demand(task, l));
      auto& v = link_flows_[l.link];
      auto it = std::find(v.begin(), v.end(), t);
      *it = v.back();
      v.pop_back();
    }
    update_neighbours(t, false);
  }

  // Updates the speed of every other flow sharing a link with t, which has just started or
  // ended. With priorities, each is recomputed whole. Without, a start can only slow a flow down
  // to the new load of a shared link (when that exceeds its bottleneck's), and an end can only
  // speed up a flow whose bottleneck was a shared link (recomputed whole); the others keep their
  // speed, so a flow over thousands of links is not rescanned for every neighbour's change.
  void update_neighbours(int t, bool started) {
    const Task& task = g_.tasks[t];
    if (seen_.size() < g_.tasks.size()) {
      seen_.assign(g_.tasks.size(), 0);
      pending_load_.assign(g_.tasks.size(), 0.0);
      pending_link_.assign(g_.tasks.size(), -1);
    }
    ++stamp_;
    touched_.clear();
    for (int i = task.loads_begin; i < task.loads_end; ++i) {
      const int link = g_.loads[i].link;
      const double ratio = cap_[link] > 0 ? link_demand_[link] / cap_[link] : 0.0;
      for (int other : link_flows_[link]) {
        if (other == t) continue;
        if (seen_[other] != stamp_) {
          seen_[other] = stamp_;
          pending_load_[other] = kKeep;
          touched_.push_back(other);
        }
        double& pending = pending_load_[other];
        if (prioritised_ || pending == kRecompute) {
          pending = kRecompute;
        } else if (started) {
          if (ratio > std::max(flows_[other].load, pending)) {
            pending = ratio;
            pending_link_[other] = link;
          }
        } else if (flows_[other].bottleneck == link) {
          pending = kRecompute;
        }
      }
    }
    for (int other : touched_) {
      if (pending_load_[other] == kRecompute)
        reschedule(other);
      else if (pending_load_[other] != kKeep)
        set_load(other, pending_load_[other], pending_link_[other]);
    }
  }

  // Gives flow t a new load (and bottleneck link) and its new finishing event. A flow starved by
  // higher priorities (infinite load) waits for them to end (they reschedule it).
  void set_load(int t, double load, int bottleneck) {
    Flow& f = flows_[t];
    f.remaining = std::max(0.0, f.remaining - (now_ - f.last_update) * f.speed);
    f.last_update = now_;
    f.load = load;
    f.bottleneck = bottleneck;
    f.speed = 1.0 / load;
    ++f.version;
    if (f.speed > 0) push(now_ + f.remaining / f.speed, t, EvType::flow_done, f.version);
  }

  // Recomputes flow t's load from every link it uses.
  void reschedule(int t) {
    const Task& task = g_.tasks[t];
    double load = 1.0;
    int bottleneck = -1;
    for (int i = task.loads_begin; i < task.loads_end; ++i) {
      const int link = g_.loads[i].link;
      if (cap_[link] <= 0) continue;
      if (!prioritised_) {
        if (link_demand_[link] / cap_[link] > load) {
          load = link_demand_[link] / cap_[link];
          bottleneck = link;
        }
        continue;
      }
      // What flows of a higher priority leave of the link, shared by this priority's flows.
      double higher = 0, same = 0;
      for (const auto& [priority, d] : link_priority_demand_[link]) {
        if (priority > task.priority) higher += d;
        if (priority == task.priority) same += d;
      }
      const double left = cap_[link] - std::min(cap_[link], higher);
      load = std::max(load, left > 0 ? same / left : std::numeric_limits<double>::infinity());
    }
    set_load(t, load, bottleneck);
  }

  // Demand on `link` of the active flows of one priority changes by `d`.
  void add_priority_demand(int link, int priority, double d) {
    auto& v = link_priority_demand_[link];
    for (auto& [p, sum] : v)
      if (p == priority) {
        sum += d;
        return;
      }
    v.emplace_back(priority, d);
  }

  const TaskGraph& g_;
  const std::vector<double>& cap_;
  std::vector<int> preds_;
  std::vector<std::size_t> next_;
  std::vector<Flow> flows_;
  std::vector<double> link_demand_;
  std::vector<std::vector<int>> link_flows_;
  // Per link, (priority, summed demand of its active flows), for the priority path.
  std::vector<std::vector<std::pair<int, double>>> link_priority_demand_;
  std::vector<std::uint32_t> seen_;
  // During update_neighbours, per flow: kKeep, kRecompute, or a new load from pending_link_.
  static constexpr double kKeep = -1, kRecompute = -2;
  std::vector<double> pending_load_;
  std::vector<int> pending_link_;
  std::vector<int> touched_;
  std::uint32_t stamp_ = 0;
  bool prioritised_ = false;  // some transfer has a priority: links are shared by priority
  std::priority_queue<Event, std::vector<Event>, std::greater<>> heap_;
  std::uint64_t seq_ = 0;
  double now_ = 0;
  EngineResult r_;
};

}  // namespace

EngineResult run_engine(const TaskGraph& g, const std::vector<double>& link_capacity) {
  return Engine(g, link_capacity).run();
}

}  // namespace hetplan::sim::detail
