// dtype conversion on a CUDA device: fp32/bf16/fp16 in any direction, round to nearest even.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "zero/core/cuda_check.h"
#include "zero/core/cuda_ops.h"

namespace zero {
namespace {

template <typename T>
__device__ float load_as_float(const T* data, std::size_t i);
template <>
__device__ float load_as_float(const float* data, std::size_t i) {
  return data[i];
}
template <>
__device__ float load_as_float(const __nv_bfloat16* data, std::size_t i) {
  return __bfloat162float(data[i]);
}
template <>
__device__ float load_as_float(const __half* data, std::size_t i) {
  return __half2float(data[i]);
}

template <typename T>
__device__ void store_from_float(T* data, std::size_t i, float value);
template <>
__device__ void store_from_float(float* data, std::size_t i, float value) {
  data[i] = value;
}
template <>
__device__ void store_from_float(__nv_bfloat16* data, std::size_t i, float value) {
  data[i] = __float2bfloat16_rn(value);
}
template <>
__device__ void store_from_float(__half* data, std::size_t i, float value) {
  data[i] = __float2half_rn(value);
}

template <typename Source, typename Destination>
__global__ void convert_kernel(const Source* source, Destination* destination, std::size_t count) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    store_from_float(destination, i, load_as_float(source, i));
  }
}

template <typename Source>
void launch_to(const Source* source, void* destination, DType destination_dtype, std::size_t count,
               cudaStream_t stream) {
  const int threads = 256;
  const int blocks =
      static_cast<int>(std::min<std::size_t>((count + threads - 1) / threads, 65535));
  switch (destination_dtype) {
    case DType::kFloat32:
      convert_kernel<<<blocks, threads, 0, stream>>>(source, static_cast<float*>(destination),
                                                     count);
      break;
    case DType::kBFloat16:
      convert_kernel<<<blocks, threads, 0, stream>>>(
          source, static_cast<__nv_bfloat16*>(destination), count);
      break;
    case DType::kFloat16:
      convert_kernel<<<blocks, threads, 0, stream>>>(source, static_cast<__half*>(destination),
                                                     count);
      break;
  }
}

}  // namespace

void convert_on_device(const void* source, DType source_dtype, void* destination,
                       DType destination_dtype, std::size_t count, CudaStreamHandle stream) {
  if (count == 0) return;
  auto cuda_stream = static_cast<cudaStream_t>(stream);
  switch (source_dtype) {
    case DType::kFloat32:
      launch_to(static_cast<const float*>(source), destination, destination_dtype, count,
                cuda_stream);
      break;
    case DType::kBFloat16:
      launch_to(static_cast<const __nv_bfloat16*>(source), destination, destination_dtype, count,
                cuda_stream);
      break;
    case DType::kFloat16:
      launch_to(static_cast<const __half*>(source), destination, destination_dtype, count,
                cuda_stream);
      break;
  }
  ZERO_CUDA_CHECK(cudaGetLastError());
}

}  // namespace zero
