// The tensor memory a rank's training steps take, as PyTorch's allocators report it.
#pragma once

#include <cstdint>
#include <memory>

namespace hetplan::runtime::detail {

// Watches the tensor allocations of the thread that makes it (and of the threads PyTorch hands its
// work to: autograd's), as c10's CPU allocator and CUDA's caching allocator report them to a
// memory profiler (c10::MemoryReportingInfoBase): the bytes live now and the most since the last
// start_step. On the CPU only what was allocated while a probe watched counts (the weights made
// before it do not); on a GPU, all that the device holds. One probe per thread at a time; it stops
// watching when destroyed, on the thread that made it.
class MemoryProbe {
 public:
  MemoryProbe();
  ~MemoryProbe();
  MemoryProbe(const MemoryProbe&) = delete;
  MemoryProbe& operator=(const MemoryProbe&) = delete;

  // A step starts: the bytes live now are its base.
  void start_step();
  // The most bytes live above the base since start_step (0 when none were allocated).
  std::int64_t step_peak() const;

 private:
  struct Watcher;
  std::shared_ptr<Watcher> watcher_;
  struct Guard;
  std::unique_ptr<Guard> guard_;
};

}  // namespace hetplan::runtime::detail
