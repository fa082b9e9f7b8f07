// The device's 16-bit storage types for kernel bodies (zero/core/kernel_thread.h's Element):
// __nv_bfloat16 and __half, widened exactly and narrowed to nearest even. For the CUDA sources of
// every target (libzero's device layer, optim/'s fused optimizers). Like cuda_check.h it includes
// no CUDA header (public headers never do): the source includes <cuda_bf16.h> and <cuda_fp16.h>
// before it.
#pragma once

#if !defined(__CUDACC__)
#error "zero/core/cuda_elements.h is for CUDA sources (nvcc)"
#endif
#if !defined(__CUDA_BF16_TYPES_EXIST__) || !defined(__CUDA_FP16_TYPES_EXIST__)
#error "include <cuda_bf16.h> and <cuda_fp16.h> before zero/core/cuda_elements.h"
#endif

#include "zero/core/kernel_thread.h"

namespace zero::kernels {

template <>
struct Element<__nv_bfloat16> {
  static __host__ __device__ __forceinline__ float widen(__nv_bfloat16 value) {
    return __bfloat162float(value);
  }
  static __host__ __device__ __forceinline__ __nv_bfloat16 narrow(float value) {
    return __float2bfloat16_rn(value);
  }
};
template <>
struct Element<__half> {
  static __host__ __device__ __forceinline__ float widen(__half value) {
    return __half2float(value);
  }
  static __host__ __device__ __forceinline__ __half narrow(float value) {
    return __float2half_rn(value);
  }
};

// The storage types the bodies of libzero's elementwise_body.h read 16-bit data as.
struct DeviceElementTypes {
  using BFloat16 = __nv_bfloat16;
  using Float16 = __half;
};

}  // namespace zero::kernels
