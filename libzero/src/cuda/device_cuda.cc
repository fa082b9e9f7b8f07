// CUDA device queries, the cudaMalloc/cudaMallocHost allocators, and library versions. cuBLAS and
// cuDNN versions come from their headers (zero::core calls neither, so links neither).
#include <cublas_api.h>
#include <cuda_runtime.h>
#include <cudnn_version.h>
#include <nccl.h>

#include <sstream>

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

namespace {

class CudaDeviceAllocator final : public Allocator {
 public:
  explicit CudaDeviceAllocator(MemoryLedger& ledger) : Allocator(MemorySpace::kDevice, ledger) {}

 protected:
  void* raw_allocate(std::size_t size_bytes) override {
    void* data = nullptr;
    if (cudaMalloc(&data, size_bytes) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    return data;
  }
  void raw_free(void* data) noexcept override { cudaFree(data); }
};

class CudaPinnedAllocator final : public Allocator {
 public:
  explicit CudaPinnedAllocator(MemoryLedger& ledger)
      : Allocator(MemorySpace::kHostPinned, ledger) {}

 protected:
  void* raw_allocate(std::size_t size_bytes) override {
    void* data = nullptr;
    if (cudaMallocHost(&data, size_bytes) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    return data;
  }
  void raw_free(void* data) noexcept override { cudaFreeHost(data); }
};

}  // namespace

std::unique_ptr<Allocator> make_allocator(MemorySpace space, MemoryLedger& ledger, bool use_cuda) {
  ZERO_CHECK(space != MemorySpace::kNvme,
             "NVMe memory is allocated by the offload swapper, not an allocator");
  if (use_cuda) {
    ZERO_CHECK(cuda_device_count() > 0,
               "a CUDA allocator was requested but no CUDA device is visible");
    if (space == MemorySpace::kDevice) return std::make_unique<CudaDeviceAllocator>(ledger);
    if (space == MemorySpace::kHostPinned) return std::make_unique<CudaPinnedAllocator>(ledger);
  }
  return std::make_unique<HostAllocator>(ledger, space);
}

}  // namespace zero
