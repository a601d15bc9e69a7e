#include "peer_watch.h"

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <vector>

namespace hetplan::runtime::detail {

struct PeerWatch::State {
  std::string host;
  int port = 0, rank = 0, world_size = 1;
  std::chrono::milliseconds beat{500};

  std::mutex mu;
  std::condition_variable cv;
  bool stop = false, asked = false;
  std::optional<std::string> answer;
};

namespace {

std::string key(const char* what, int rank) { return fmt::format("hetplan/{}/{}", what, rank); }

std::string list_ranks(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i)
    out += (i == 0 ? "" : i + 1 == ranks.size() ? " and " : ", ") + std::to_string(ranks[i]);
  return out;
}

// Samples every rank's beat counter, waits four beats, samples again: the ranks whose counter
// stood still and that did not mark a failure of their own stopped. Rank 0 then keeps the store
// up until every live rank has asked too (at most twenty beats), so that none of them blames the
// store's rank for leaving first.
std::string diagnose(c10d::Store& store, const PeerWatch::State& s) {
  store.set(key("failed", s.rank), std::vector<uint8_t>{1});
  std::vector<std::int64_t> before(s.world_size);
  for (int k = 0; k < s.world_size; ++k) before[k] = store.add(key("beat", k), 0);
  std::this_thread::sleep_for(4 * s.beat);
  std::vector<int> stopped, failed;
  for (int k = 0; k < s.world_size; ++k) {
    if (k == s.rank) continue;
    if (store.check({key("failed", k)}))
      failed.push_back(k);
    else if (store.add(key("beat", k), 0) == before[k])
      stopped.push_back(k);
  }
  store.set(key("asked", s.rank), std::vector<uint8_t>{1});
  if (s.rank == 0)
    for (int wait = 0; wait < 20; ++wait) {
      bool all = true;
      for (int k = 1; k < s.world_size; ++k)
        if (std::find(stopped.begin(), stopped.end(), k) == stopped.end() &&
            !store.check({key("asked", k)}))
          all = false;
      if (all) break;
      std::this_thread::sleep_for(s.beat);
    }
  if (!stopped.empty()) return list_ranks(stopped) + " stopped answering (died or hangs)";
  if (!failed.empty()) return list_ranks(failed) + " failed too (see their messages)";
  return "every other rank still answers";
}

void watch(const std::shared_ptr<PeerWatch::State>& s) {
  c10::intrusive_ptr<c10d::Store> store;
  try {
    c10d::TCPStoreOptions o;
    o.port = static_cast<std::uint16_t>(s->port);
    o.isServer = false;
    o.waitWorkers = false;
    o.timeout = 4 * s->beat;
    store = c10::make_intrusive<c10d::TCPStore>(s->host, o);
  } catch (const std::exception&) {
    store.reset();  // no beats; an answer says the store is gone
  }
  for (;;) {
    std::unique_lock lock(s->mu);
    s->cv.wait_for(lock, s->beat, [&] { return s->stop || s->asked; });
    if (s->stop) return;
    const bool asked = s->asked;
    lock.unlock();
    std::string answer = "the job's store on rank 0 no longer answers (rank 0 died or hangs)";
    try {
      if (store && !asked) store->add(key("beat", s->rank), 1);
      if (store && asked) answer = diagnose(*store, *s);
    } catch (const std::exception&) {
      // A beat that fails is skipped; a diagnosis that fails blames the store's rank.
    }
    if (!asked) continue;
    lock.lock();
    s->answer = answer;
    s->asked = false;
    s->cv.notify_all();
  }
}

}  // namespace

PeerWatch::PeerWatch(const std::string& host, int port, int rank, int world_size,
                     std::chrono::milliseconds beat)
    : state_(std::make_shared<State>()) {
  state_->host = host;
  state_->port = port;
  state_->rank = rank;
  state_->world_size = world_size;
  state_->beat = beat;
  // Detached: a thread blocked on a store that no longer answers must not hold up the exit.
  std::thread([s = state_] { watch(s); }).detach();
}

PeerWatch::~PeerWatch() {
  std::lock_guard lock(state_->mu);
  state_->stop = true;
  state_->cv.notify_all();
}

std::string PeerWatch::who_stopped() {
  std::unique_lock lock(state_->mu);
  state_->answer.reset();
  state_->asked = true;
  state_->cv.notify_all();
  // Rank 0's diagnosis takes 4 beats plus up to 20 waiting for the others, and store round trips.
  if (!state_->cv.wait_for(lock, 40 * state_->beat, [&] { return state_->answer.has_value(); }))
    return "the job's store on rank 0 does not answer (rank 0 died or hangs)";
  return *state_->answer;
}

}  // namespace hetplan::runtime::detail
