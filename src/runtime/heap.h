// The process heap as training needs it.
#pragma once

namespace hetplan::runtime::detail {

// glibc's malloc gives large freed blocks back to the kernel (an mmap threshold that moves, and
// heap trimming), so a step that allocates and frees the same activations and optimizer
// temporaries every time pays page faults for them every time: on the machine this was written
// on, an Adam step over a million parameters took 5.9 ms that way and 1.3 ms with the blocks
// kept (an MLP step 7-10 ms against 4.3-5.5). Keeps them (blocks up to 32 MiB, glibc's largest
// threshold), as PyTorch's caching allocator does on a GPU. glibc only; elsewhere nothing.
// Calibration probes run with the same heap, so that they time what a step's ops do.
void keep_freed_memory();

}  // namespace hetplan::runtime::detail
