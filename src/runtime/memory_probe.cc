#include "memory_probe.h"

#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>

#include <algorithm>
#include <atomic>

namespace hetplan::runtime::detail {

struct MemoryProbe::Watcher final : c10::MemoryReportingInfoBase {
  std::atomic<std::int64_t> live{0}, base{0}, peak{0};

  void reportMemoryUsage(void* /*ptr*/, std::int64_t /*alloc_size*/, std::int64_t total_allocated,
                         std::int64_t /*total_reserved*/, c10::Device /*device*/) override {
    live = total_allocated;
    std::int64_t seen = peak;
    while (total_allocated > seen && !peak.compare_exchange_weak(seen, total_allocated)) {
    }
  }
  bool memoryProfilingEnabled() const override { return true; }
};

struct MemoryProbe::Guard {
  c10::DebugInfoGuard guard;
  explicit Guard(std::shared_ptr<c10::DebugInfoBase> info)
      : guard(c10::DebugInfoKind::PROFILER_STATE, std::move(info)) {}
};

MemoryProbe::MemoryProbe()
    : watcher_(std::make_shared<Watcher>()), guard_(std::make_unique<Guard>(watcher_)) {}

MemoryProbe::~MemoryProbe() = default;

void MemoryProbe::start_step() {
  watcher_->base = watcher_->live.load();
  watcher_->peak = watcher_->live.load();
}

std::int64_t MemoryProbe::step_peak() const {
  return std::max<std::int64_t>(0, watcher_->peak - watcher_->base);
}

}  // namespace hetplan::runtime::detail
