// Internal to the runtime: which ranks of a job stopped answering. Every rank beats a counter in
// the job's c10d store from a thread of its own (with its own connection, so a rank blocked in a
// collective still beats). When a collective fails, the rank asks who stopped: the ranks whose
// counter stood still over a few beats and that did not report a failure of their own.
#pragma once

#include <chrono>
#include <memory>
#include <string>

namespace hetplan::runtime::detail {

class PeerWatch {
 public:
  // Connects to the store at host:port (rank 0 serves it) and starts beating.
  PeerWatch(const std::string& host, int port, int rank, int world_size,
            std::chrono::milliseconds beat = std::chrono::milliseconds(500));
  ~PeerWatch();
  PeerWatch(const PeerWatch&) = delete;
  PeerWatch& operator=(const PeerWatch&) = delete;

  // Marks this rank as failing, watches the others' counters over four beats and says which
  // stopped, e.g. "rank 2 stopped answering (died or hangs)", else which failed with errors of
  // their own, or that the store on rank 0 no longer answers. Blocks for four beats; rank 0, which
  // keeps the store up until the live ranks have asked too, for up to twenty more.
  std::string who_stopped();

  struct State;  // shared with the watching thread, which may outlive this object

 private:
  std::shared_ptr<State> state_;
};

}  // namespace hetplan::runtime::detail
