// DLCP's transport (chunk_order.h): a group's gradient summed chunk by chunk over hetplan's own
// TCP connections instead of Gloo's, so that each chunk can travel in its traffic class. Every
// pair of the group's ranks holds one connection per class, each marked with its class's DSCP
// (traffic_class_tos), which the emulated links serve in class order (emulate.h). One thread per
// class sends that class's chunks in priority order, so the classes compete on the links and the
// urgent one wins.
//
// Where the ranks have several paths between them (the emulation's two bridges), each flow takes
// one by a hash of its ends (ECMP) or every payload is split over all of them (spray).
//
// Two forms: a ring all-reduce per chunk, and a parameter server sharded by chunk (chunk k of the
// priority order is summed by rank k mod n: every other rank pushes its part to it, and it sends
// the sum back to each).
//
// Dropping (DLCP's bounded loss). Droppable chunks (class 2) go only while the deadline has not
// passed: the deadline is `grace_s` after the moment every chunk of classes 0 and 1 is summed on
// the rank that decides. In the ring, rank 0 decides before each droppable chunk and passes its
// word along the ring, so every rank drops the same chunks, and a dropped chunk sums to zero on
// every rank. In the parameter server, each rank decides for the parts it pushes (a dropped part
// is a one-byte notice), the owner sums what arrived, and the sums always go back whole, flagged
// when a part was missing: every rank ends with the same values and flags either way.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "chunk_order.h"
#include "hetplan/core/error.h"

namespace hetplan::runtime::detail {

// The IP type-of-service byte (DSCP << 2) of traffic class `cls`: EF (46), AF21 (18), CS1 (8).
int traffic_class_tos(int cls);

enum class SyncForm { ring, parameter_server };

struct ChunkSyncOptions {
  SyncForm form = SyncForm::ring;
  // Over several paths: every payload split over all of them (DLCP's per-packet spraying), or
  // each flow (sender, receiver, class) on one path picked by a hash of its ends (ECMP).
  bool spray = false;
  double grace_s = 0;     // the deadline: this long after classes 0 and 1 are summed
  bool drop_all = false;  // drop every droppable chunk (the bound's worst case)
  std::chrono::milliseconds timeout{60000};  // the longest wait for a peer
};

struct ChunkSyncStats {
  // Of this rank's gradient: the elements it did not send (ring: the chunks dropped, alike on
  // every rank) and the share of its squared norm they held.
  double dropped_fraction = 0;
  double dropped_norm_fraction = 0;
  double seconds = 0;
  // When each class's last chunk was summed, from the start (0 for a class without chunks).
  std::array<double, kTrafficClasses> class_seconds{};
  // Per chunk (in the order given): whether every rank's part is in its sum. Alike on every rank
  // (the ring drops whole chunks by rank 0's word; a parameter server's sums come back with a
  // flag saying whether any push was missing).
  std::vector<char> complete;
};

// Where the ranks find each other: set publishes a key, get waits for one (the job's store). Either
// may throw (connect reports it as an error).
struct Rendezvous {
  std::function<void(const std::string& key, const std::string& value)> set;
  std::function<std::string(const std::string& key)> get;
};

class ChunkTransport {
 public:
  // Connects rank `rank` of a group of `size`, listening on each of `paths` (IPv4 addresses of
  // this host, one per path to the peers, every rank with as many); keys under `prefix` keep
  // groups apart. One connection per peer, path and class.
  static Result<std::unique_ptr<ChunkTransport>> connect(const Rendezvous& rv,
                                                         const std::string& prefix, int rank,
                                                         int size,
                                                         const std::vector<std::string>& paths,
                                                         std::chrono::milliseconds timeout);
  ~ChunkTransport();
  ChunkTransport(const ChunkTransport&) = delete;
  ChunkTransport& operator=(const ChunkTransport&) = delete;

  // Sums `flat` over the group in place, chunk by chunk (`chunks` from order_chunks, alike on
  // every rank). Every rank calls it with the same chunks and options.
  Result<ChunkSyncStats> sum(float* flat, const std::vector<OrderedChunk>& chunks,
                             const ChunkSyncOptions& opts);

  int rank() const { return rank_; }
  int size() const { return size_; }
  int paths() const { return paths_; }

 private:
  ChunkTransport() = default;
  int fd(int path, int cls, int peer) const;
  int rank_ = 0, size_ = 1, paths_ = 1;
  // By (path x kTrafficClasses + class) x size + peer: the connection (-1 for this rank).
  std::vector<int> fds_;
};

// ECMP's choice for the flow from rank `from` to rank `to` in class `cls`: one of `paths`, by a
// hash of its ends (both ends compute the same).
int ecmp_path(int from, int to, int cls, int paths);

// The IPv4 address this host uses to reach `host` (its outgoing interface's), e.g. 127.0.0.1
// for 127.0.0.1.
Result<std::string> local_address_towards(const std::string& host);

// The addresses this rank's transport listens on, one per path: those of the interfaces named in
// the environment variable kPathInterfacesVariable (emulate.h; comma-separated, as an emulation
// with several paths sets it), else the one towards `master`.
Result<std::vector<std::string>> path_addresses(const std::string& master);

}  // namespace hetplan::runtime::detail
