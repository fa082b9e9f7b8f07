// Elementwise kernels of the CUDA backend: fill, scale/axpy, sum of squares with inf/NaN flag,
// over fp32/bf16/fp16 with fp32 arithmetic. Each kernel's body is in elementwise_body.h.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda_kernels.h"
#include "elementwise_body.h"
#include "zero/core/cuda_check.h"
#include "zero/core/cuda_elements.h"

namespace zero::cuda {
namespace {

using kernels::DeviceElementTypes;
using kernels::DeviceThread;

__global__ void fill_kernel(void* destination, DType dtype, std::size_t count, float value) {
  kernels::fill_body<DeviceElementTypes>(DeviceThread{}, destination, dtype, count, value);
}

__global__ void scale_kernel(const void* source, DType source_dtype, void* destination,
                             DType destination_dtype, std::size_t count, float alpha,
                             bool accumulate) {
  kernels::scale_body<DeviceElementTypes>(DeviceThread{}, source, source_dtype, destination,
                                          destination_dtype, count, alpha, accumulate);
}

__global__ void squares_kernel(const void* x, DType dtype, std::size_t count, double* result) {
  __shared__ kernels::SquaresShared shared;
  kernels::squares_body<DeviceElementTypes>(DeviceThread{}, shared, x, dtype, count, result);
}

}  // namespace

void launch_fill(void* destination, DType dtype, std::size_t count, float value,
                 cudaStream_t stream) {
  if (count == 0) return;
  kernels::launch_kernel(fill_kernel, kernels::grid_stride_launch(count), stream, destination,
                         dtype, count, value);
  ZERO_CUDA_CHECK(cudaGetLastError());
}

void launch_scale(const void* source, DType source_dtype, void* destination,
                  DType destination_dtype, std::size_t count, float alpha, bool accumulate,
                  cudaStream_t stream) {
  if (count == 0) return;
  kernels::launch_kernel(scale_kernel, kernels::grid_stride_launch(count), stream, source,
                         source_dtype, destination, destination_dtype, count, alpha, accumulate);
  ZERO_CUDA_CHECK(cudaGetLastError());
}

void launch_sum_of_squares(const void* x, DType dtype, std::size_t count, double* device_result,
                           cudaStream_t stream) {
  if (count == 0) return;
  kernels::launch_kernel(squares_kernel, kernels::grid_stride_launch(count), stream, x, dtype,
                         count, device_result);
  ZERO_CUDA_CHECK(cudaGetLastError());
}

}  // namespace zero::cuda
