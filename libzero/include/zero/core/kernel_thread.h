// What a CUDA kernel body sees of its thread: block and thread indices, the warp's shuffles, the
// block's barrier, atomics, views of shared memory, and the launch configuration its launcher
// computes. Every __global__ kernel of zero is a one-line wrapper that calls a
// `__host__ __device__` body templated on the thread type: on the device the thread is
// DeviceThread (blockIdx, __shfl_xor_sync, __syncthreads); in the CPU tests it is the emulator's
// (tests/common/kernel_emulator.h), which runs the same body over the same launch grid with the
// 32 lanes of a warp stepped together at each shuffle, shared memory per block, __syncthreads as
// phase boundaries, and every shared-memory access checked for races. Includes no CUDA header
// (nvcc provides the built-ins it names); C++17 so nvcc compiles it.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "zero/core/error.h"

#if defined(__CUDACC__)
#define ZERO_HOST_DEVICE __host__ __device__
#define ZERO_HOST_DEVICE_INLINE __host__ __device__ __forceinline__
#else
#define ZERO_HOST_DEVICE
#define ZERO_HOST_DEVICE_INLINE inline
#endif
// `#pragma unroll` in device code only (the host compiler does not know it).
#if defined(__CUDA_ARCH__)
#define ZERO_UNROLL _Pragma("unroll")
#else
#define ZERO_UNROLL
#endif

namespace zero::kernels {

constexpr int kWarpSize = 32;

// A grid or block extent (CUDA's dim3 without the CUDA header).
struct KernelDim {
  unsigned x = 1, y = 1, z = 1;
  constexpr std::uint64_t count() const {
    return static_cast<std::uint64_t>(x) * y * static_cast<std::uint64_t>(z);
  }
};

// One launch: grid and block extents and the dynamic shared memory (static __shared__ memory is
// the body's Shared type, sized by sizeof).
struct LaunchConfig {
  KernelDim grid;
  KernelDim block;
  std::size_t dynamic_shared_bytes = 0;
};

// ceil(work / per_block) blocks, at least 1 and at most max_blocks.
constexpr unsigned blocks_for(std::int64_t work, std::int64_t per_block, std::int64_t max_blocks) {
  const std::int64_t blocks = (work + per_block - 1) / per_block;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > max_blocks ? max_blocks : blocks));
}

// A one-dimensional launch of `blocks` blocks of `threads` threads.
constexpr LaunchConfig linear_launch(unsigned blocks, unsigned threads) {
  LaunchConfig config;
  config.grid.x = blocks;
  config.block.x = threads;
  return config;
}

// The thread's index within its block, x fastest (CUDA's linear thread id; lanes and warps follow
// it), and its lane within the warp.
template <typename Thread>
ZERO_HOST_DEVICE_INLINE unsigned linear_thread(const Thread& thread) {
  const KernelDim t = thread.thread_index(), b = thread.block_dim();
  return t.x + b.x * (t.y + b.y * t.z);
}
template <typename Thread>
ZERO_HOST_DEVICE_INLINE int lane_of(const Thread& thread) {
  return static_cast<int>(linear_thread(thread) % kWarpSize);
}

// A grid-stride loop's first index and stride (x dimension).
template <typename Thread>
ZERO_HOST_DEVICE_INLINE std::size_t grid_stride_first(const Thread& thread) {
  return static_cast<std::size_t>(thread.block_index().x) * thread.block_dim().x +
         thread.thread_index().x;
}
template <typename Thread>
ZERO_HOST_DEVICE_INLINE std::size_t grid_stride(const Thread& thread) {
  return static_cast<std::size_t>(thread.grid_dim().x) * thread.block_dim().x;
}

#if !defined(__CUDA_ARCH__)
// Emulation's check of a vector access (`bytes` wide) that the device would fault on or misread.
inline void require_aligned(const void* data, std::size_t bytes, const char* what) {
  ZERO_CHECK(reinterpret_cast<std::uintptr_t>(data) % bytes == 0, "kernel emulation: ", what,
             " at ", data, " is not aligned to its ", bytes, "-byte access");
}
#endif

// Butterfly reductions over the 32 lanes of a warp (every lane ends with the result).
template <typename Thread>
ZERO_HOST_DEVICE_INLINE float warp_sum(const Thread& thread, float value) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) value += thread.shfl_xor(value, offset);
  return value;
}
template <typename Thread>
ZERO_HOST_DEVICE_INLINE float warp_max(const Thread& thread, float value) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    value = fmaxf(value, thread.shfl_xor(value, offset));
  return value;
}

// a · b and a + b rounded once each, never contracted into an FMA (the CPU backend's rounding).
ZERO_HOST_DEVICE_INLINE float multiply_rounded(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  volatile float product = a * b;
  return product;
#endif
}
ZERO_HOST_DEVICE_INLINE float add_rounded(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  volatile float sum = a + b;
  return sum;
#endif
}
ZERO_HOST_DEVICE_INLINE bool is_finite(double value) {
#if defined(__CUDA_ARCH__)
  return isfinite(value);
#else
  return std::isfinite(value);
#endif
}

// A body's view of shared memory, `thread.shared(pointer)`: element i is `view[i]`. A body touches
// shared memory only through views, so the emulator sees every access (a static __shared__
// struct's members and the dynamic shared memory alike: `thread.shared(shared.partial)`). On the
// device the view is the pointer: view[i] is a T&, and inlined it compiles to the plain access.
// In emulation (kernel_emulator.h) view[i] records which thread read or wrote which word between
// barriers, and fails on a race as compute-sanitizer's racecheck reports one.
template <typename T>
class SharedView {
 public:
  ZERO_HOST_DEVICE_INLINE explicit SharedView(T* data) : data_(data) {}
  template <typename Index>
  ZERO_HOST_DEVICE_INLINE T& operator[](Index i) const {
    return data_[i];
  }
  // The view from element `offset` on.
  template <typename Index>
  ZERO_HOST_DEVICE_INLINE SharedView operator+(Index offset) const {
    return SharedView(data_ + offset);
  }
  // Element i's address for a vector access (a 128-bit load) or an alignment check; no access.
  template <typename Index>
  ZERO_HOST_DEVICE_INLINE T* address(Index i) const {
    return data_ + i;
  }

 private:
  T* data_;
};

// Widening and narrowing of a storage type through fp32: specialised for float here, for
// __nv_bfloat16/__half in the CUDA sources (zero/core/cuda_elements.h) and for
// zero::BFloat16/Float16 in the emulator, all rounding to nearest even.
template <typename T>
struct Element;
template <>
struct Element<float> {
  static ZERO_HOST_DEVICE_INLINE float widen(float value) { return value; }
  static ZERO_HOST_DEVICE_INLINE float narrow(float value) { return value; }
};

#if defined(__CUDACC__)
// The thread of a running kernel.
struct DeviceThread {
  __device__ KernelDim block_index() const { return {blockIdx.x, blockIdx.y, blockIdx.z}; }
  __device__ KernelDim thread_index() const { return {threadIdx.x, threadIdx.y, threadIdx.z}; }
  __device__ KernelDim block_dim() const { return {blockDim.x, blockDim.y, blockDim.z}; }
  __device__ KernelDim grid_dim() const { return {gridDim.x, gridDim.y, gridDim.z}; }
  // Every lane of the warp must call it (full mask).
  template <typename T>
  __device__ T shfl_xor(T value, int lane_mask) const {
    return __shfl_xor_sync(0xffffffffu, value, lane_mask);
  }
  // A view of shared memory at `data` (SharedView).
  template <typename T>
  __device__ SharedView<T> shared(T* data) const {
    return SharedView<T>(data);
  }
  __device__ void sync_warp() const { __syncwarp(); }
  __device__ void sync_block() const { __syncthreads(); }
  __device__ double atomic_add(double* address, double value) const {
    return atomicAdd(address, value);
  }
};

inline dim3 to_dim3(KernelDim dim) { return dim3(dim.x, dim.y, dim.z); }

// kernel<<<config, stream>>>(args...); the caller checks cudaGetLastError.
template <typename... Params, typename... Args>
void launch_kernel(void (*kernel)(Params...), const LaunchConfig& config, cudaStream_t stream,
                   Args... args) {
  kernel<<<to_dim3(config.grid), to_dim3(config.block), config.dynamic_shared_bytes, stream>>>(
      args...);
}
#endif

}  // namespace zero::kernels
