// The CUDA allocators, one definition for make_allocator() and the CUDA device context (internal).
#pragma once

#include <memory>

#include "zero/core/allocator.h"

namespace zero {

// cudaMalloc on `device` (-1: the current device); caching keeps freed blocks by size.
std::unique_ptr<Allocator> make_cuda_device_allocator(MemoryLedger& ledger, int device,
                                                      bool caching);
// cudaHostAlloc pinned host memory.
std::unique_ptr<Allocator> make_cuda_pinned_allocator(MemoryLedger& ledger, bool caching);

}  // namespace zero
