// Elementwise kernels of the CUDA backend: fill, scale/axpy, sum of squares with inf/NaN flag,
// over fp32/bf16/fp16 with fp32 arithmetic.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "cuda_kernels.h"
#include "zero/core/cuda_check.h"

namespace zero::cuda {
namespace {

constexpr int kThreads = 256;

int blocks_for(std::size_t count) {
  return static_cast<int>(std::min<std::size_t>((count + kThreads - 1) / kThreads, 65535));
}

__device__ float load(const void* data, DType dtype, std::size_t i) {
  switch (dtype) {
    case DType::kFloat32: return static_cast<const float*>(data)[i];
    case DType::kBFloat16: return __bfloat162float(static_cast<const __nv_bfloat16*>(data)[i]);
    case DType::kFloat16: return __half2float(static_cast<const __half*>(data)[i]);
  }
  return 0.0f;
}

__device__ void store(void* data, DType dtype, std::size_t i, float value) {
  switch (dtype) {
    case DType::kFloat32: static_cast<float*>(data)[i] = value; break;
    case DType::kBFloat16: static_cast<__nv_bfloat16*>(data)[i] = __float2bfloat16_rn(value); break;
    case DType::kFloat16: static_cast<__half*>(data)[i] = __float2half_rn(value); break;
  }
}

__global__ void fill_kernel(void* destination, DType dtype, std::size_t count, float value) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    store(destination, dtype, i, value);
}

__global__ void scale_kernel(const void* source, DType source_dtype, void* destination,
                             DType destination_dtype, std::size_t count, float alpha,
                             bool accumulate) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    // __fmul_rn/__fadd_rn: no contraction into an FMA, the CPU backend's rounding.
    float value = __fmul_rn(load(source, source_dtype, i), alpha);
    if (accumulate) value = __fadd_rn(load(destination, destination_dtype, i), value);
    store(destination, destination_dtype, i, value);
  }
}

__global__ void squares_kernel(const void* x, DType dtype, std::size_t count, double* result) {
  __shared__ double partial[kThreads];
  double sum = 0.0;
  bool nonfinite = false;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const double value = load(x, dtype, i);
    nonfinite |= !isfinite(value);
    sum += value * value;
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int step = blockDim.x / 2; step > 0; step /= 2) {
    if (static_cast<int>(threadIdx.x) < step) partial[threadIdx.x] += partial[threadIdx.x + step];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(result, partial[0]);
  if (nonfinite) result[1] = 1.0;
}

}  // namespace

void launch_fill(void* destination, DType dtype, std::size_t count, float value,
                 cudaStream_t stream) {
  if (count == 0) return;
  fill_kernel<<<blocks_for(count), kThreads, 0, stream>>>(destination, dtype, count, value);
  ZERO_CUDA_CHECK(cudaGetLastError());
}

void launch_scale(const void* source, DType source_dtype, void* destination,
                  DType destination_dtype, std::size_t count, float alpha, bool accumulate,
                  cudaStream_t stream) {
  if (count == 0) return;
  scale_kernel<<<blocks_for(count), kThreads, 0, stream>>>(
      source, source_dtype, destination, destination_dtype, count, alpha, accumulate);
  ZERO_CUDA_CHECK(cudaGetLastError());
}

void launch_sum_of_squares(const void* x, DType dtype, std::size_t count, double* device_result,
                           cudaStream_t stream) {
  if (count == 0) return;
  squares_kernel<<<blocks_for(count), kThreads, 0, stream>>>(x, dtype, count, device_result);
  ZERO_CUDA_CHECK(cudaGetLastError());
}

}  // namespace zero::cuda
