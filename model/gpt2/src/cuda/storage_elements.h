// The device's 16-bit storage types as the GPT-2 kernel bodies read and write them
// (zero/core/kernel_thread.h's kernels::Element): __nv_bfloat16 and __half, widened exactly and
// narrowed to nearest even, as zero::BFloat16/Float16 are in the CPU emulation test. Wrapped in
// structs of their own so that the bodies' templates see one type per storage format. CUDA
// sources only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "zero/core/dtype.h"
#include "zero/core/kernel_thread.h"

namespace zero::gpt2::cuda {

struct Bf16Element {
  __nv_bfloat16 value;
};
struct Fp16Element {
  __half value;
};
static_assert(sizeof(Bf16Element) == 2 && sizeof(Fp16Element) == 2);

// f(tag) with tag a null pointer of `dtype`'s storage type (float*, Bf16Element* or
// Fp16Element*): the one switch from a runtime dtype to a kernel template's element type.
template <typename F>
void with_storage_type(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat32: f(static_cast<float*>(nullptr)); return;
    case DType::kBFloat16: f(static_cast<Bf16Element*>(nullptr)); return;
    case DType::kFloat16: f(static_cast<Fp16Element*>(nullptr)); return;
  }
}

}  // namespace zero::gpt2::cuda

namespace zero::kernels {

template <>
struct Element<gpt2::cuda::Bf16Element> {
  static __host__ __device__ __forceinline__ float widen(gpt2::cuda::Bf16Element element) {
    return __bfloat162float(element.value);
  }
  static __host__ __device__ __forceinline__ gpt2::cuda::Bf16Element narrow(float value) {
    return {__float2bfloat16_rn(value)};
  }
};
template <>
struct Element<gpt2::cuda::Fp16Element> {
  static __host__ __device__ __forceinline__ float widen(gpt2::cuda::Fp16Element element) {
    return __half2float(element.value);
  }
  static __host__ __device__ __forceinline__ gpt2::cuda::Fp16Element narrow(float value) {
    return {__float2half_rn(value)};
  }
};

}  // namespace zero::kernels
