// The CUDA allocators: cudaMalloc device memory, cudaHostAlloc pinned host memory.
#include "cuda_allocators.h"

#include <cuda_runtime.h>

namespace zero {
namespace {

// Device memory through cudaMalloc; with caching, freed blocks are kept by size by the Allocator
// base and handed to the next request of their size (PyTorch's caching allocator).
class CudaDeviceAllocator final : public Allocator {
 public:
  CudaDeviceAllocator(MemoryLedger& ledger, int device, bool caching)
      : Allocator(MemorySpace::kDevice, ledger, caching), device_(device) {}
  ~CudaDeviceAllocator() override { release_cached(); }

 protected:
  void* raw_allocate(std::size_t size_bytes) override {
    void* data = nullptr;
    if (device_ >= 0) cudaSetDevice(device_);
    if (cudaMalloc(&data, size_bytes) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    return data;
  }
  void raw_free(void* data) noexcept override { cudaFree(data); }

 private:
  int device_;
};

class CudaPinnedAllocator final : public Allocator {
 public:
  CudaPinnedAllocator(MemoryLedger& ledger, bool caching)
      : Allocator(MemorySpace::kHostPinned, ledger, caching) {}
  ~CudaPinnedAllocator() override { release_cached(); }

 protected:
  void* raw_allocate(std::size_t size_bytes) override {
    void* data = nullptr;
    if (cudaHostAlloc(&data, size_bytes, cudaHostAllocDefault) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    return data;
  }
  void raw_free(void* data) noexcept override { cudaFreeHost(data); }
};

}  // namespace

std::unique_ptr<Allocator> make_cuda_device_allocator(MemoryLedger& ledger, int device,
                                                      bool caching) {
  return std::make_unique<CudaDeviceAllocator>(ledger, device, caching);
}

std::unique_ptr<Allocator> make_cuda_pinned_allocator(MemoryLedger& ledger, bool caching) {
  return std::make_unique<CudaPinnedAllocator>(ledger, caching);
}

}  // namespace zero
