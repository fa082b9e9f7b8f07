// The CUDA backend's elementwise kernels (cuda_kernels.cu), launched on a stream (internal;
// C++17 so nvcc compiles it).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "zero/core/dtype.h"

namespace zero::cuda {

// destination[i] = value.
void launch_fill(void* destination, DType dtype, std::size_t count, float value,
                 cudaStream_t stream);
// destination[i] = alpha · source[i]; accumulate: destination[i] += alpha · source[i] (fp32
// arithmetic, rounded to nearest even on store).
void launch_scale(const void* source, DType source_dtype, void* destination,
                  DType destination_dtype, std::size_t count, float alpha, bool accumulate,
                  cudaStream_t stream);
// device_result[0] += Σ x², device_result[1] = 1.0 when some x is inf/NaN (device_result holds two
// doubles, zeroed by the caller on the same stream).
void launch_sum_of_squares(const void* x, DType dtype, std::size_t count, double* device_result,
                           cudaStream_t stream);

}  // namespace zero::cuda
