// The CUDA device layer's entry points (device_cuda.cc, cuda_context.cc), which zero::cuda
// registers as zero::core's CUDA backend (core/cuda_backend.h; comm/cuda_registration.cc). Code
// elsewhere calls the public functions they stand behind (cuda_device_count, make_cuda_context,
// ...), never these.
#pragma once

#include <memory>
#include <vector>

#include "zero/core/allocator.h"
#include "zero/core/cuda_ops.h"
#include "zero/core/device_context.h"

namespace zero::detail {

// Devices the CUDA runtime sees; 0 without a driver or device (the runtime's error cleared).
int cuda_runtime_device_count();
std::vector<CudaDeviceInfo> cuda_runtime_devices();
// The CUDA DeviceContext of device `index`; zero::Error when no such device is visible.
std::unique_ptr<DeviceContext> make_cuda_runtime_context(int index);
// cudaMalloc / cudaMallocHost allocators for kDevice / kHostPinned when `use_cuda`, else host.
std::unique_ptr<Allocator> make_cuda_runtime_allocator(MemorySpace space, MemoryLedger& ledger,
                                                       bool use_cuda);

}  // namespace zero::detail
