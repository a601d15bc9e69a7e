// The discrete-event engine. Events sit in a binary heap keyed on (time, sequence number), so ties
// resolve in a fixed order. Transfers are flows: after their latency they move their bytes at a
// speed that every change in the set of flows on their links recomputes (each link's capacity goes
// to the flows of the highest priority first; flows of one priority share what is left in
// proportion to their demands; a flow goes as fast as its most loaded link allows). A compute task
// of a stream under a CPU quota runs while its quota's budget lasts and waits for the next
// period when it runs out (task_graph.h), at the pace its host's shared cores allow (every change
// in the set of quotas computing recomputes it). A task waiting for late gradient chunks drops them
// within their pool's budget (task_graph.h's drop_preds_of).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <queue>
#include <utility>

#include "task_graph.h"

namespace hetplan::sim::detail {
namespace {

enum class EvType : std::uint8_t { compute_done, latency_done, flow_done, quota_step, drop_check };

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

// The running state of a quota: its budget and period, and the compute task it runs (its stream
// runs one at a time).
struct QuotaRun {
  double budget = 0;
  double period_end = 0;
  int task = -1;
  double remaining = 0;  // seconds of the task's compute left
  int messaging = 0;     // transfers in flight on the quota's devices
  double last = 0;       // when budget and remaining were last brought up to date
  std::uint32_t version = 0;
};

// A ready task of a dynamic stream: the smallest key first, then the first to become ready.
struct Ready {
  double key;
  std::uint64_t seq;
  int task;
  bool operator>(const Ready& o) const { return key != o.key ? key > o.key : seq > o.seq; }
};

// Below this, at time t, a budget is spent and a task's compute done (rounding of sums of times,
// relative to the time: one rounding step of t is 2.2e-16 t).
double time_eps(double t) { return 1e-12 * std::max(1.0, t); }

class Engine {
 public:
  Engine(const TaskGraph& g, const std::vector<double>& cap, EngineCarry* carry)
      : g_(g),
        stop_(g.stop),
        succs_(g.successors()),
        cap_(cap),
        carry_(carry),
        preds_(g.tasks.size()),
        next_(g.streams.size(), 0),
        ready_(g.streams.size()),
        busy_(g.streams.size(), 0),
        flows_(g.tasks.size()),
        link_demand_(cap.size(), 0.0),
        link_flows_(cap.size()),
        link_priority_demand_(cap.size()),
        quota_(g.quotas.size()) {
    for (const Task& t : g.tasks) prioritised_ = prioritised_ || t.priority != 0;
    r_.start.assign(g.tasks.size(), -1);
    r_.end.assign(g.tasks.size(), -1);
    r_.dropped.assign(g.tasks.size(), 0);
    drop_checked_.assign(g.tasks.size(), 0);
    budget_ = g.drop_budget;
    for (std::size_t i = 0; i < g.tasks.size(); ++i) preds_[i] = g.tasks[i].preds;
    find_solo_flows();
    for (std::size_t q = 0; q < quota_.size(); ++q) {
      const CpuQuota& cq = g.quotas[q];
      const bool carried = carry_ && carry_->budget.size() == quota_.size();
      constexpr double kNever = std::numeric_limits<double>::infinity();
      quota_[q].budget = cq.unlimited ? kNever : carried ? carry_->budget[q] : cq.share * cq.period;
      quota_[q].period_end = cq.unlimited ? kNever : carried ? carry_->period_end[q] : cq.period;
      quota_[q].last = now_;
    }
  }

  EngineResult run() {
    for (std::size_t s = 0; s < g_.streams.size(); ++s)
      if (g_.stream_dynamic[s])
        for (int t : g_.streams[s])
          if (preds_[t] == 0) make_ready(t);
    for (std::size_t s = 0; s < g_.streams.size(); ++s) try_start_stream(static_cast<int>(s));
    while (!heap_.empty()) {
      Event e = heap_.top();
      heap_.pop();
      ++r_.events;
      stop_.poll();
      now_ = e.time;
      switch (e.type) {
        case EvType::compute_done:
          finish(e.task);
          break;
        case EvType::quota_step:
          if (e.version == quota_[e.task].version) quota_step(e.task);
          break;
        case EvType::latency_done:
          begin_flow(e.task);
          break;
        case EvType::drop_check:
          // After everything else that happened at this instant (its chunks may have become
          // ready in the same cascade of events).
          if (r_.start[e.task] < 0 && preds_[e.task] != 0) {
            drop_late(e.task);
            if (preds_[e.task] == 0) try_start_stream(g_.tasks[e.task].stream);
          }
          break;
        case EvType::flow_done:
          if (e.version != flows_[e.task].version) break;  // superseded by a speed change
          if (solo_load_[e.task] == 0) end_flow(e.task);
          finish(e.task);
          break;
      }
    }
    for (double end : r_.end)
      if (end < 0) r_.deadlock = true;
    if (carry_) {
      carry_->budget.clear();
      carry_->period_end.clear();
      for (std::size_t q = 0; q < quota_.size(); ++q) {
        advance(static_cast<int>(q), r_.makespan);
        carry_->budget.push_back(quota_[q].budget);
        carry_->period_end.push_back(quota_[q].period_end - r_.makespan);
      }
    }
    return std::move(r_);
  }

 private:
  void push(double t, int task, EvType type, std::uint32_t version = 0) {
    heap_.push(Event{t, seq_++, task, type, version});
  }

  void make_ready(int t) {
    const int s = g_.tasks[t].stream;
    ready_[s].push(Ready{g_.tasks[t].order_key, seq_++, t});
  }

  void try_start_stream(int s) {
    if (g_.stream_dynamic[s]) {
      while (!ready_[s].empty() && r_.dropped[ready_[s].top().task]) ready_[s].pop();
      if (busy_[s] || ready_[s].empty()) return;
      const int t = ready_[s].top().task;
      ready_[s].pop();
      busy_[s] = 1;
      start(t);
      return;
    }
    const auto& order = g_.streams[s];
    const std::size_t i = next_[s];
    if (i >= order.size()) return;
    const int t = order[i];
    if (preds_[t] != 0 && !g_.drop_preds_of(t).empty() && !drop_checked_[t]) {
      // The task is due: once everything happening now has happened, it drops what is late.
      drop_checked_[t] = 1;
      push(now_, t, EvType::drop_check);
    }
    if (preds_[t] != 0 || r_.start[t] >= 0) return;
    start(t);
  }

  // Task t is due (it heads its stream) and needs chunks still queued: drops them, lowest
  // priority first, while their pools' budgets last. Chunks that become ready later are sent.
  void drop_late(int t) {
    std::vector<int> queued;
    for (int c : g_.drop_preds_of(t))
      if (preds_[c] == 0 && r_.start[c] < 0) queued.push_back(c);
    std::sort(queued.begin(), queued.end(), [&](int a, int b) {
      const double ka = g_.tasks[a].order_key, kb = g_.tasks[b].order_key;
      return ka != kb ? ka > kb : a > b;
    });
    for (int c : queued) {
      const Task& chunk = g_.tasks[c];
      if (chunk.drop_pool < 0 || budget_[chunk.drop_pool] < chunk.drop_bytes) continue;
      budget_[chunk.drop_pool] -= chunk.drop_bytes;
      r_.dropped[c] = 1;
      r_.start[c] = r_.end[c] = now_;
      for (int s : succs_.of(c))
        if (--preds_[s] == 0) {
          if (g_.stream_dynamic[g_.tasks[s].stream]) make_ready(s);
          if (s != t) try_start_stream(g_.tasks[s].stream);
        }
    }
  }

  void start(int t) {
    const Task& task = g_.tasks[t];
    r_.start[t] = now_;
    if (task.is_transfer) {
      set_messaging(t, +1);
      push(now_ + task.latency, t, EvType::latency_done);
      return;
    }
    const int q = g_.stream_quota[task.stream];
    if (q < 0) {
      push(now_ + task.duration, t, EvType::compute_done);
      return;
    }
    QuotaRun& run = quota_[q];
    advance(q, now_);
    run.task = t;
    run.remaining = task.duration;
    run.last = now_;
    schedule_quota(q);
    reshare();
  }

  void finish(int t) {
    r_.end[t] = now_;
    r_.makespan = std::max(r_.makespan, now_);
    const Task& task = g_.tasks[t];
    if (task.is_transfer) set_messaging(t, -1);
    if (!g_.stream_dynamic[task.stream]) {
      ++next_[task.stream];
      try_start_stream(task.stream);
      for (int s : succs_.of(t))
        if (--preds_[s] == 0) {
          if (g_.stream_dynamic[g_.tasks[s].stream]) make_ready(s);
          try_start_stream(g_.tasks[s].stream);
        }
      return;
    }
    // A dynamic stream chooses among every task ready now, its own successors included.
    busy_[task.stream] = 0;
    for (int s : succs_.of(t))
      if (--preds_[s] == 0 && g_.stream_dynamic[g_.tasks[s].stream]) make_ready(s);
    try_start_stream(task.stream);
    for (int s : succs_.of(t))
      if (preds_[s] == 0) try_start_stream(g_.tasks[s].stream);
  }

  // The CPU time a quota's transfers spend per second in flight.
  double messaging_rate(int q) const {
    return quota_[q].messaging > 0 && !g_.quotas[q].unlimited ? g_.quotas[q].share : 0.0;
  }

  // Whether quota q computes now: it runs a task with compute left and budget to spend.
  bool computing(int q) const {
    const QuotaRun& run = quota_[q];
    const double eps = time_eps(now_);
    return run.task >= 0 && run.remaining > eps && run.budget > eps;
  }

  // On a host of few cores, the pace of every quota's compute after a quota started or stopped
  // computing: the quotas are brought up to now at the pace they had, and their next steps
  // scheduled at the new one.
  void reshare() {
    if (g_.host_cores <= 0) return;
    double processes = 0;
    for (std::size_t q = 0; q < quota_.size(); ++q) {
      if (quota_[q].task < 0) continue;
      advance(static_cast<int>(q), now_);
      if (computing(static_cast<int>(q))) processes += g_.quotas[q].processes;
    }
    const double pace = processes > g_.host_cores ? g_.host_cores / processes : 1.0;
    if (pace == pace_) return;
    pace_ = pace;
    for (std::size_t q = 0; q < quota_.size(); ++q)
      if (quota_[q].task >= 0) schedule_quota(static_cast<int>(q));
  }

  // Brings quota q's budget (and its task's compute) up to time t. Its compute runs while the
  // budget lasts, at the pace the host's cores allow; its transfers spend it even when it has run
  // out, a debt that the next periods' budgets pay first (as the kernel does for a group that
  // overran). Its task's events keep a computing quota from running out of budget or crossing a
  // period's end before t.
  void advance(int q, double t) {
    QuotaRun& run = quota_[q];
    const CpuQuota& cq = g_.quotas[q];
    while (run.last < t) {
      const double until = std::min(t, run.period_end);
      const double dt = until - run.last, messaging = messaging_rate(q);
      double computed = 0;
      if (run.task >= 0 && run.budget > time_eps(t))
        computed = pace_ * std::min(dt, run.budget / (pace_ + messaging));
      run.remaining -= computed;
      run.budget -= computed + dt * messaging;
      run.last = until;
      if (run.last + time_eps(t) < run.period_end) break;
      run.period_end += cq.period;
      run.budget = cq.share * cq.period + std::min(0.0, run.budget);
    }
  }

  // The next step of quota q's task: its end (now, when its compute is done), its budget's
  // running out or, throttled, its next period (so no step crosses a period's end, where the
  // budget is renewed).
  void schedule_quota(int q) {
    QuotaRun& run = quota_[q];
    ++run.version;
    const double eps = time_eps(now_);
    double next = run.period_end;
    if (run.remaining <= eps)
      next = now_;
    else if (run.budget > eps)
      next = now_ + std::min({run.remaining / pace_, run.budget / (pace_ + messaging_rate(q)),
                              run.period_end - now_});
    heap_.push(Event{std::max(next, now_), seq_++, q, EvType::quota_step, run.version});
  }

  // A transfer starts (+1) or ends (-1) on its quotas' devices.
  void set_messaging(int t, int change) {
    for (int q : g_.quotas_of(t)) {
      advance(q, now_);
      quota_[q].messaging += change;
      if (quota_[q].task >= 0) schedule_quota(q);
    }
  }

  void quota_step(int q) {
    QuotaRun& run = quota_[q];
    advance(q, now_);
    if (run.remaining > time_eps(now_)) {
      schedule_quota(q);
      reshare();  // (it ran out of budget, or a new period renewed it)
      return;
    }
    const int t = run.task;
    run.task = -1;
    reshare();
    finish(t);
  }

  double demand(const Task& task, const cost::LinkLoad& l) const {
    return task.duration > 0 ? l.bytes / task.duration : 0.0;
  }

  // A transfer whose links no task of another stream uses (a lane's own tensor-parallel
  // collectives) never shares them: tasks of one stream run one at a time. Its load is fixed,
  // worked out here as begin_flow and reschedule would (solo_load_[t]; 0 for the others), and
  // its flow skips the links' bookkeeping.
  void find_solo_flows() {
    constexpr int kUnused = -1, kShared = -2;
    std::vector<int> owner(cap_.size(), kUnused);  // the stream using each link
    for (const Task& t : g_.tasks)
      if (t.is_transfer)
        for (int i = t.loads_begin; i < t.loads_end; ++i) {
          int& o = owner[g_.loads[i].link];
          o = o == kUnused || o == t.stream ? t.stream : kShared;
        }
    solo_load_.assign(g_.tasks.size(), 0.0);
    std::vector<double> demand_on(cap_.size(), 0.0);
    for (std::size_t t = 0; t < g_.tasks.size(); ++t) {
      const Task& task = g_.tasks[t];
      if (!task.is_transfer || task.duration <= 0) continue;
      bool solo = true;
      for (int i = task.loads_begin; i < task.loads_end && solo; ++i)
        solo = owner[g_.loads[i].link] >= 0;
      if (!solo) continue;
      for (int i = task.loads_begin; i < task.loads_end; ++i)
        demand_on[g_.loads[i].link] += demand(task, g_.loads[i]);
      double load = 1.0;
      for (int i = task.loads_begin; i < task.loads_end; ++i) {
        const int link = g_.loads[i].link;
        if (cap_[link] > 0) load = std::max(load, demand_on[link] / cap_[link]);
      }
      for (int i = task.loads_begin; i < task.loads_end; ++i) demand_on[g_.loads[i].link] = 0;
      solo_load_[t] = load;
    }
  }

  void begin_flow(int t) {
    const Task& task = g_.tasks[t];
    if (task.duration <= 0 || task.loads_begin == task.loads_end) {
      finish(t);
      return;
    }
    if (solo_load_[t] > 0) {
      const double speed = 1.0 / solo_load_[t];
      push(now_ + task.duration / speed, t, EvType::flow_done, flows_[t].version);
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
  StopPoll stop_;
  const Successors succs_;
  const std::vector<double>& cap_;
  EngineCarry* carry_;
  std::vector<int> preds_;
  std::vector<std::size_t> next_;
  // Dynamic streams: their ready tasks, and whether one of their tasks runs.
  std::vector<std::priority_queue<Ready, std::vector<Ready>, std::greater<>>> ready_;
  std::vector<char> busy_;
  std::vector<Flow> flows_;
  std::vector<double> solo_load_;  // per task: a solo flow's fixed load, or 0
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
  std::vector<QuotaRun> quota_;
  double pace_ = 1;  // of the quotas' compute: full speed, or the host's cores shared (reshare)
  std::vector<double> budget_;      // per drop pool, bytes that may still be dropped
  std::vector<char> drop_checked_;  // per task with drop preds: its drop check is scheduled
  std::priority_queue<Event, std::vector<Event>, std::greater<>> heap_;
  std::uint64_t seq_ = 0;
  double now_ = 0;
  EngineResult r_;
};

}  // namespace

EngineResult run_engine(const TaskGraph& g, const std::vector<double>& link_capacity,
                        EngineCarry* carry) {
  return Engine(g, link_capacity, carry).run();
}

}  // namespace hetplan::sim::detail
