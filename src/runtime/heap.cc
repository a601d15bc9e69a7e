#include "heap.h"

#include <malloc.h>

#include <climits>

namespace hetplan::runtime::detail {

void keep_freed_memory() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
}

}  // namespace hetplan::runtime::detail
