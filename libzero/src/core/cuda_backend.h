// The CUDA device layer as zero::core reaches it: a table of src/cuda/'s entry points that
// zero::cuda registers before main when a program links it (src/comm/cuda_registration.cc), so
// zero::core itself links no CUDA library and a CPU-only program needs no CUDA toolkit. The
// public functions (cuda_device_count, cuda_devices, make_cuda_context, make_allocator) go
// through it, and without it say what to link (kNoCudaBackend).
#pragma once

#include <memory>
#include <vector>

#include "zero/core/allocator.h"
#include "zero/core/cuda_ops.h"
#include "zero/core/device_context.h"
#include "zero/core/memory_ledger.h"

namespace zero::detail {

struct CudaBackend {
  int (*device_count)() = nullptr;
  std::vector<CudaDeviceInfo> (*devices)() = nullptr;
  std::unique_ptr<DeviceContext> (*make_context)(int index) = nullptr;
  std::unique_ptr<Allocator> (*make_allocator)(MemorySpace space, MemoryLedger& ledger,
                                               bool use_cuda) = nullptr;
};

// Called once, during static initialisation, by the program's copy of zero::cuda; every entry
// must be set. `backend` must outlive the program (a static).
void register_cuda_backend(const CudaBackend& backend);
// The registered backend; nullptr when the program did not link zero::cuda.
const CudaBackend* cuda_backend();

// "... link zero::cuda ..." : how to get the CUDA backend into a program, for the errors of the
// functions that need it.
extern const char kNoCudaBackend[];

}  // namespace zero::detail
