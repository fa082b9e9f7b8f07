// dtype conversion on a CUDA device: fp32/bf16/fp16 in any direction, round to nearest even. The
// kernel's body is elementwise_body.h's convert_body.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "elementwise_body.h"
#include "zero/core/cuda_check.h"
#include "zero/core/cuda_elements.h"
#include "zero/core/cuda_ops.h"

namespace zero {
namespace {

using kernels::DeviceThread;

template <typename Source, typename Destination>
__global__ void convert_kernel(const Source* source, Destination* destination, std::size_t count) {
  kernels::convert_body(DeviceThread{}, source, destination, count);
}

template <typename Source>
void launch_to(const Source* source, void* destination, DType destination_dtype, std::size_t count,
               cudaStream_t stream) {
  const kernels::LaunchConfig config = kernels::grid_stride_launch(count);
  switch (destination_dtype) {
    case DType::kFloat32:
      kernels::launch_kernel(convert_kernel<Source, float>, config, stream, source,
                             static_cast<float*>(destination), count);
      break;
    case DType::kBFloat16:
      kernels::launch_kernel(convert_kernel<Source, __nv_bfloat16>, config, stream, source,
                             static_cast<__nv_bfloat16*>(destination), count);
      break;
    case DType::kFloat16:
      kernels::launch_kernel(convert_kernel<Source, __half>, config, stream, source,
                             static_cast<__half*>(destination), count);
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
