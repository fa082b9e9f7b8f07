// The device's 16-bit storage types for kernel bodies (zero/core/kernel_thread.h's Element):
// __nv_bfloat16 and __half, widened exactly and narrowed to nearest even. CUDA sources only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

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

// The storage types the bodies of elementwise_body.h and optimizer_body.h read 16-bit data as.
struct DeviceElementTypes {
  using BFloat16 = __nv_bfloat16;
  using Float16 = __half;
};

}  // namespace zero::kernels
