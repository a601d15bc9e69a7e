#include "chunk_transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

namespace hetplan::runtime::detail {
namespace {

using Clock = std::chrono::steady_clock;

std::string errno_text() { return std::strerror(errno); }

// One message through one connection: sent from, or received into, `data`.
struct Transfer {
  int fd = -1;
  bool send = false;
  char* data = nullptr;
  std::size_t size = 0;
  std::size_t done = 0;
};

// Moves every transfer through, at once: on each connection its sends in order and its receives
// in order. An error when a connection fails or nothing moves for `timeout`.
Result<bool> exchange(std::vector<Transfer>& ts, std::chrono::milliseconds timeout) {
  while (true) {
    std::vector<pollfd> polls;
    std::vector<std::pair<Transfer*, Transfer*>> heads;  // per poll entry: its send, its receive
    for (Transfer& t : ts) {
      if (t.done == t.size) continue;
      auto it = std::find_if(polls.begin(), polls.end(), [&](const pollfd& p) { return p.fd == t.fd; });
      if (it == polls.end()) {
        polls.push_back({t.fd, 0, 0});
        heads.emplace_back(nullptr, nullptr);
        it = polls.end() - 1;
      }
      auto& [snd, rcv] = heads[static_cast<std::size_t>(it - polls.begin())];
      if (t.send && !snd) {
        snd = &t;
        it->events |= POLLOUT;
      } else if (!t.send && !rcv) {
        rcv = &t;
        it->events |= POLLIN;
      }
    }
    if (polls.empty()) return true;
    const int ready = ::poll(polls.data(), polls.size(), static_cast<int>(timeout.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return Error{fmt::format("gradient transport: poll: {}", errno_text())};
    if (ready == 0)
      return Error{fmt::format("gradient transport: a peer sent or took nothing for {} ms",
                               timeout.count())};
    for (std::size_t i = 0; i < polls.size(); ++i) {
      const short got = polls[i].revents;
      auto [snd, rcv] = heads[i];
      if (snd && (got & (POLLOUT | POLLERR | POLLHUP))) {
        const ssize_t n = ::send(snd->fd, snd->data + snd->done, snd->size - snd->done,
                                 MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) snd->done += static_cast<std::size_t>(n);
        else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
          return Error{fmt::format("gradient transport: a peer's connection failed: {}",
                                   errno_text())};
      }
      if (rcv && (got & (POLLIN | POLLERR | POLLHUP))) {
        const ssize_t n =
            ::recv(rcv->fd, rcv->data + rcv->done, rcv->size - rcv->done, MSG_DONTWAIT);
        if (n > 0) rcv->done += static_cast<std::size_t>(n);
        else if (n == 0)
          return Error{"gradient transport: a peer closed its connection (did it stop?)"};
        else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
          return Error{fmt::format("gradient transport: a peer's connection failed: {}",
                                   errno_text())};
      }
    }
  }
}

// Waits for `fd` to be readable, at most `timeout`.
bool wait_readable(int fd, std::chrono::milliseconds timeout) {
  pollfd p{fd, POLLIN, 0};
  int r;
  do r = ::poll(&p, 1, static_cast<int>(timeout.count()));
  while (r < 0 && errno == EINTR);
  return r > 0;
}

bool read_all(int fd, void* data, std::size_t size, std::chrono::milliseconds timeout) {
  auto* p = static_cast<char*>(data);
  while (size > 0) {
    if (!wait_readable(fd, timeout)) return false;
    const ssize_t n = ::recv(fd, p, size, 0);
    if (n <= 0 && !(n < 0 && errno == EINTR)) return false;
    if (n > 0) p += n, size -= static_cast<std::size_t>(n);
  }
  return true;
}

void mark(int fd, int cls) {
  const int tos = traffic_class_tos(cls), one = 1;
  ::setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof tos);
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

Result<sockaddr_in> parse_endpoint(const std::string& text) {
  const auto colon = text.rfind(':');
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (colon == std::string::npos || ::inet_pton(AF_INET, text.substr(0, colon).c_str(), &a.sin_addr) != 1)
    return Error{fmt::format("gradient transport: bad endpoint '{}' (expected IPv4:port)", text)};
  a.sin_port = htons(static_cast<std::uint16_t>(std::stoi(text.substr(colon + 1))));
  return a;
}

// What one sum() shares between its class threads.
struct SumState {
  const ChunkSyncOptions* opts = nullptr;
  Clock::time_point start;
  std::atomic<int> mandatory_left{0};
  std::atomic<std::int64_t> mandatory_done_ns{-1};
  std::mutex mu;
  std::optional<Error> error;
  double dropped_numel = 0, dropped_norm2 = 0;

  bool deadline_passed() const {
    if (opts->drop_all) return true;
    const std::int64_t done = mandatory_done_ns.load();
    if (done < 0) return false;
    const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start);
    return static_cast<double>(now.count() - done) * 1e-9 >= opts->grace_s;
  }
  void fail(Error e) {
    std::lock_guard<std::mutex> lock(mu);
    if (!error) error = std::move(e);
  }
  void dropped(const float* data, std::int64_t numel) {
    double n2 = 0;
    for (std::int64_t i = 0; i < numel; ++i) n2 += static_cast<double>(data[i]) * data[i];
    std::lock_guard<std::mutex> lock(mu);
    dropped_numel += static_cast<double>(numel);
    dropped_norm2 += n2;
  }
};

}  // namespace

int traffic_class_tos(int cls) { return emulated_class_tos(cls); }

Result<std::string> local_address_towards(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), "9", &hints, &found) != 0 || !found)
    return Error{fmt::format("gradient transport: cannot resolve '{}' to an IPv4 address", host)};
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in me{};
  socklen_t len = sizeof me;
  const bool ok = fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&me), &len) == 0;
  const std::string why = errno_text();
  ::freeaddrinfo(found);
  if (fd >= 0) ::close(fd);
  if (!ok)
    return Error{fmt::format("gradient transport: no route from this host to {}: {}", host, why)};
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &me.sin_addr, text, sizeof text);
  return std::string(text);
}

Result<std::vector<std::string>> path_addresses(const std::string& master) {
  const char* names = std::getenv(kPathInterfacesVariable);
  if (!names || !*names) {
    auto one = local_address_towards(master);
    if (!one) return one.error();
    return std::vector<std::string>{*one};
  }
  ifaddrs* all = nullptr;
  if (::getifaddrs(&all) != 0)
    return Error{fmt::format("gradient transport: cannot list the interfaces: {}", errno_text())};
  std::vector<std::string> out;
  std::optional<Error> missing;
  const std::string list = names;
  for (std::size_t at = 0; at <= list.size() && !missing;) {
    const auto comma = std::min(list.find(',', at), list.size());
    const std::string name = list.substr(at, comma - at);
    at = comma + 1;
    std::string found;
    for (const ifaddrs* i = all; i; i = i->ifa_next)
      if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && name == i->ifa_name) {
        char text[INET_ADDRSTRLEN] = {};
        ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, text,
                    sizeof text);
        found = text;
        break;
      }
    if (found.empty())
      missing = Error{fmt::format("{}: interface '{}' has no IPv4 address here", kPathInterfacesVariable,
                                  name)};
    out.push_back(found);
  }
  ::freeifaddrs(all);
  if (missing) return *missing;
  return out;
}

Result<std::unique_ptr<ChunkTransport>> ChunkTransport::connect(
    const Rendezvous& rv, const std::string& prefix, int rank, int size,
    const std::vector<std::string>& paths, std::chrono::milliseconds timeout) {
  std::unique_ptr<ChunkTransport> t(new ChunkTransport());
  t->rank_ = rank;
  t->size_ = size;
  t->paths_ = std::max<int>(1, static_cast<int>(paths.size()));
  const int channels = t->paths_ * kTrafficClasses;
  t->fds_.assign(static_cast<std::size_t>(channels * size), -1);
  if (size == 1) return t;
  // A listener per path; the endpoints published as "ip:port,ip:port".
  std::vector<int> listeners;
  std::string endpoints;
  auto close_all = [&] {
    for (int l : listeners) ::close(l);
  };
  for (const std::string& address : paths) {
    auto me = parse_endpoint(address + ":0");
    if (!me) {
      close_all();
      return me.error();
    }
    const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    socklen_t len = sizeof *me;
    if (listener >= 0) listeners.push_back(listener);
    if (listener < 0 || ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        ::bind(listener, reinterpret_cast<sockaddr*>(&*me), sizeof *me) != 0 ||
        ::listen(listener, size * kTrafficClasses) != 0 ||
        ::getsockname(listener, reinterpret_cast<sockaddr*>(&*me), &len) != 0) {
      const std::string why = errno_text();
      close_all();
      return Error{fmt::format("gradient transport: cannot listen on {}: {}", address, why)};
    }
    endpoints += fmt::format("{}{}:{}", endpoints.empty() ? "" : ",", address, ntohs(me->sin_port));
  }
  std::optional<Error> failed;
  // The rendezvous throws what its store throws (a peer that never published within the store's
  // timeout): an error naming it, the sockets closed.
  try {
    rv.set(fmt::format("{}/{}", prefix, rank), endpoints);
  } catch (const std::exception& e) {
    failed = Error{fmt::format("gradient transport: rank {} cannot publish its address: {}", rank,
                               e.what())};
  }
  // To the higher ranks: one connection per path and class, each opened with a hello (rank,
  // channel).
  for (int peer = rank + 1; peer < size && !failed; ++peer) {
    std::string theirs;
    try {
      theirs = rv.get(fmt::format("{}/{}", prefix, peer));
    } catch (const std::exception& e) {
      failed = Error{fmt::format("gradient transport: rank {} did not find rank {}: {}", rank,
                                 peer, e.what())};
      break;
    }
    std::vector<std::string> ends;
    for (std::size_t at = 0; at <= theirs.size();) {
      const auto comma = std::min(theirs.find(',', at), theirs.size());
      ends.push_back(theirs.substr(at, comma - at));
      at = comma + 1;
    }
    if (static_cast<int>(ends.size()) != t->paths_) {
      failed = Error{fmt::format("gradient transport: rank {} has {} paths, rank {} has {}", peer,
                                 ends.size(), rank, t->paths_)};
      break;
    }
    for (int ch = 0; ch < channels && !failed; ++ch) {
      auto to = parse_endpoint(ends[static_cast<std::size_t>(ch / kTrafficClasses)]);
      if (!to) {
        failed = to.error();
        break;
      }
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd >= 0) mark(fd, ch % kTrafficClasses);
      const std::int32_t hello[2] = {rank, ch};
      if (fd < 0 || ::connect(fd, reinterpret_cast<const sockaddr*>(&*to), sizeof *to) != 0 ||
          ::send(fd, hello, sizeof hello, MSG_NOSIGNAL) != sizeof hello) {
        failed = Error{fmt::format("gradient transport: rank {} cannot reach rank {} at {}: {}",
                                   rank, peer, ends[static_cast<std::size_t>(ch / kTrafficClasses)],
                                   errno_text())};
        if (fd >= 0) ::close(fd);
        break;
      }
      t->fds_[static_cast<std::size_t>(ch * size + peer)] = fd;
    }
  }
  // From the lower ones, on every listener.
  for (int k = 0; k < rank * channels && !failed; ++k) {
    std::vector<pollfd> polls;
    for (int l : listeners) polls.push_back({l, POLLIN, 0});
    int fd = -1;
    if (::poll(polls.data(), polls.size(), static_cast<int>(timeout.count())) > 0)
      for (const pollfd& p : polls)
        if (p.revents & POLLIN) {
          fd = ::accept4(p.fd, nullptr, nullptr, SOCK_CLOEXEC);
          break;
        }
    std::int32_t hello[2] = {-1, -1};
    if (fd < 0 || !read_all(fd, hello, sizeof hello, timeout) || hello[0] < 0 ||
        hello[0] >= rank || hello[1] < 0 || hello[1] >= channels ||
        t->fds_[static_cast<std::size_t>(hello[1] * size + hello[0])] >= 0) {
      failed = Error{fmt::format(
          "gradient transport: rank {} got {} of the {} connections of lower ranks within {} ms",
          rank, k, rank * channels, timeout.count())};
      if (fd >= 0) ::close(fd);
      break;
    }
    mark(fd, hello[1] % kTrafficClasses);
    t->fds_[static_cast<std::size_t>(hello[1] * size + hello[0])] = fd;
  }
  close_all();
  if (failed) return *failed;
  for (int fd : t->fds_)
    if (fd >= 0) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  return t;
}

ChunkTransport::~ChunkTransport() {
  for (int fd : fds_)
    if (fd >= 0) ::close(fd);
}

int ChunkTransport::fd(int path, int cls, int peer) const {
  return fds_[static_cast<std::size_t>((path * kTrafficClasses + cls) * size_ + peer)];
}

int ecmp_path(int from, int to, int cls, int paths) {
  std::uint64_t z = (static_cast<std::uint64_t>(from) * 1000003u + static_cast<std::uint64_t>(to)) *
                        8u +
                    static_cast<std::uint64_t>(cls) + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<int>(z % static_cast<std::uint64_t>(std::max(1, paths)));
}

Result<ChunkSyncStats> ChunkTransport::sum(float* flat, const std::vector<OrderedChunk>& chunks,
                                           const ChunkSyncOptions& opts) {
  SumState st;
  st.opts = &opts;
  st.start = Clock::now();
  double total_numel = 0, total_norm2 = 0;
  std::array<std::vector<std::size_t>, kTrafficClasses> of_class;
  for (std::size_t k = 0; k < chunks.size(); ++k) {
    of_class[static_cast<std::size_t>(chunks[k].cls)].push_back(k);
    total_numel += static_cast<double>(chunks[k].numel);
    for (std::int64_t i = 0; i < chunks[k].numel; ++i) {
      const double v = flat[chunks[k].offset + i];
      total_norm2 += v * v;
    }
  }
  for (int c = 0; c + 1 < kTrafficClasses; ++c)
    if (!of_class[c].empty()) ++st.mandatory_left;
  if (st.mandatory_left == 0) st.mandatory_done_ns = 0;
  ChunkSyncStats stats;
  stats.complete.assign(chunks.size(), 1);
  const int n = size_, r = rank_;
  const auto timeout = opts.timeout;

  const int P = paths_;
  auto run_class = [&](int c) -> Result<bool> {
    // A control byte to or from `peer` (on the first path); a payload, over the flow's hashed path
    // (ecmp) or split over every path (spray), in whole floats.
    auto control = [&](std::vector<Transfer>& ts, bool send, int peer, void* data) {
      ts.push_back({fd(0, c, peer), send, static_cast<char*>(data), 1, 0});
    };
    auto payload = [&](std::vector<Transfer>& ts, bool send, int peer, float* data,
                       std::int64_t numel) {
      if (!opts.spray || P == 1) {
        const int path = ecmp_path(send ? r : peer, send ? peer : r, c, P);
        ts.push_back({fd(path, c, peer), send, reinterpret_cast<char*>(data),
                      sizeof(float) * static_cast<std::size_t>(numel), 0});
        return;
      }
      for (int q = 0; q < P; ++q) {
        const std::int64_t lo = numel * q / P, hi = numel * (q + 1) / P;
        ts.push_back({fd(q, c, peer), send, reinterpret_cast<char*>(data + lo),
                      sizeof(float) * static_cast<std::size_t>(hi - lo), 0});
      }
    };
    std::vector<float> tmp;
    bool stopped = false;  // ring: rank 0's word that the droppable chunks stop
    if (opts.form == SyncForm::ring) {
      const int right = (r + 1) % n, left = (r + n - 1) % n;
      for (std::size_t k : of_class[static_cast<std::size_t>(c)]) {
        const OrderedChunk& ch = chunks[k];
        float* base = flat + ch.offset;
        if (ch.droppable) {
          if (!stopped) {
            char go = r == 0 ? static_cast<char>(!st.deadline_passed()) : 0;
            std::vector<Transfer> ts;
            if (r != 0) control(ts, false, left, &go);
            if (auto ok = exchange(ts, timeout); !ok) return ok;
            ts.clear();
            if (r != n - 1) control(ts, true, right, &go);
            if (auto ok = exchange(ts, timeout); !ok) return ok;
            stopped = go == 0;
          }
          if (stopped) {
            stats.complete[k] = 0;
            st.dropped(base, ch.numel);
            std::fill(base, base + ch.numel, 0.0f);
            continue;
          }
        }
        auto seg = [&](int i) { return ch.numel * ((i % n + n) % n) / n; };
        auto seg_len = [&](int i) { return ch.numel * ((i % n + n) % n + 1) / n - seg(i); };
        tmp.resize(static_cast<std::size_t>(ch.numel / n + 1));
        for (int s = 0; s + 1 < n; ++s) {  // reduce-scatter
          const int out = r - s, in = r - s - 1;
          std::vector<Transfer> ts;
          payload(ts, true, right, base + seg(out), seg_len(out));
          payload(ts, false, left, tmp.data(), seg_len(in));
          if (auto ok = exchange(ts, timeout); !ok) return ok;
          float* dst = base + seg(in);
          for (std::int64_t i = 0; i < seg_len(in); ++i) dst[i] += tmp[static_cast<std::size_t>(i)];
        }
        for (int s = 0; s + 1 < n; ++s) {  // all-gather
          const int out = r + 1 - s, in = r - s;
          std::vector<Transfer> ts;
          payload(ts, true, right, base + seg(out), seg_len(out));
          payload(ts, false, left, base + seg(in), seg_len(in));
          if (auto ok = exchange(ts, timeout); !ok) return ok;
        }
      }
      return true;
    }
    // Parameter server: pushes (the owner sums what arrives), then the sums back.
    for (std::size_t k : of_class[static_cast<std::size_t>(c)]) {
      const OrderedChunk& ch = chunks[k];
      float* base = flat + ch.offset;
      const int owner = static_cast<int>(k % static_cast<std::size_t>(n));
      if (owner == r) {
        std::vector<char> present(static_cast<std::size_t>(n), 0);
        std::vector<Transfer> ts;
        for (int p = 0; p < n; ++p)
          if (p != r) control(ts, false, p, &present[static_cast<std::size_t>(p)]);
        if (auto ok = exchange(ts, timeout); !ok) return ok;
        tmp.resize(static_cast<std::size_t>(ch.numel) * static_cast<std::size_t>(n));
        ts.clear();
        for (int p = 0; p < n; ++p)
          if (p != r && present[static_cast<std::size_t>(p)])
            payload(ts, false, p, tmp.data() + p * ch.numel, ch.numel);
        if (auto ok = exchange(ts, timeout); !ok) return ok;
        for (int p = 0; p < n; ++p)
          if (p != r && present[static_cast<std::size_t>(p)])
            for (std::int64_t i = 0; i < ch.numel; ++i) base[i] += tmp[p * ch.numel + i];
        stats.complete[k] = static_cast<char>(
            std::count(present.begin(), present.end(), char{1}) == n - 1);
      } else {
        char present = ch.droppable && st.deadline_passed() ? 0 : 1;
        std::vector<Transfer> ts;
        control(ts, true, owner, &present);
        if (present)
          payload(ts, true, owner, base, ch.numel);
        else
          st.dropped(base, ch.numel);
        if (auto ok = exchange(ts, timeout); !ok) return ok;
      }
    }
    for (std::size_t k : of_class[static_cast<std::size_t>(c)]) {
      const OrderedChunk& ch = chunks[k];
      const int owner = static_cast<int>(k % static_cast<std::size_t>(n));
      std::vector<Transfer> ts;
      for (int p = 0; p < n; ++p)
        if (owner == r ? p != r : p == owner) {
          control(ts, owner == r, p, &stats.complete[k]);
          payload(ts, owner == r, p, flat + ch.offset, ch.numel);
        }
      if (auto ok = exchange(ts, timeout); !ok) return ok;
    }
    return true;
  };

  auto thread_body = [&](int c) {
    auto ok = n > 1 ? run_class(c) : Result<bool>(true);
    if (!ok) st.fail(ok.error());
    stats.class_seconds[static_cast<std::size_t>(c)] =
        std::chrono::duration<double>(Clock::now() - st.start).count();
    if (c + 1 < kTrafficClasses && --st.mandatory_left == 0)
      st.mandatory_done_ns =
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - st.start).count();
  };
  std::vector<std::thread> threads;
  for (int c = 0; c < kTrafficClasses; ++c)
    if (!of_class[static_cast<std::size_t>(c)].empty()) threads.emplace_back(thread_body, c);
  for (auto& t : threads) t.join();
  if (st.error) return *st.error;
  stats.seconds = std::chrono::duration<double>(Clock::now() - st.start).count();
  stats.dropped_fraction = total_numel > 0 ? st.dropped_numel / total_numel : 0;
  stats.dropped_norm_fraction = total_norm2 > 0 ? st.dropped_norm2 / total_norm2 : 0;
  return stats;
}

}  // namespace hetplan::runtime::detail
