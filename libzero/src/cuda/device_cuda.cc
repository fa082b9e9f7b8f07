// CUDA device queries, the cudaMalloc/cudaMallocHost allocators, and library versions. cuBLAS and
// cuDNN versions come from their headers (zero::core calls neither, so links neither).
#include <cublas_api.h>
#include <cuda_runtime.h>
#include <cudnn_version.h>
#include <nccl.h>

#include <sstream>

#include "cuda_allocators.h"
#include "cuda_check.h"
#include "zero/core/allocator.h"
#include "zero/core/device.h"

namespace zero {

bool cuda_compiled() { return true; }

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device / no driver" error
    return 0;
  }
  return count;
}

std::string cuda_library_versions() {
  std::ostringstream out;
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  int nccl = 0;
  ncclGetVersion(&nccl);
  out << "cuda runtime " << runtime / 1000 << "." << (runtime % 1000) / 10 << ", cublas "
      << CUBLAS_VER_MAJOR << "." << CUBLAS_VER_MINOR << " (headers), cudnn " << CUDNN_VERSION
      << " (headers), nccl " << nccl;
  return out.str();
}

std::unique_ptr<Allocator> make_allocator(MemorySpace space, MemoryLedger& ledger, bool use_cuda) {
  ZERO_CHECK(space != MemorySpace::kNvme,
             "NVMe memory is allocated by the offload swapper, not an allocator");
  if (use_cuda) {
    ZERO_CHECK(cuda_device_count() > 0,
               "a CUDA allocator was requested but no CUDA device is visible");
    if (space == MemorySpace::kDevice)
      return make_cuda_device_allocator(ledger, /*device=*/-1, /*caching=*/false);
    if (space == MemorySpace::kHostPinned)
      return make_cuda_pinned_allocator(ledger, /*caching=*/false);
  }
  return std::make_unique<HostAllocator>(ledger, space);
}

}  // namespace zero
