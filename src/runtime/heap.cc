#include "heap.h"

#include <climits>

#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace hetplan::runtime::detail {

void keep_freed_memory() {
#ifdef __GLIBC__
  // Best effort: a C library that refuses leaves the heap as it was, slower but correct.
  (void)mallopt(M_MMAP_THRESHOLD, 32 << 20);
  (void)mallopt(M_TRIM_THRESHOLD, INT_MAX);
#endif
}

}  // namespace hetplan::runtime::detail
