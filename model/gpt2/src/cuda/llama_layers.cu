// The Llama family's elementwise CUDA kernels: the rotary embedding (in place, forward and
// backward) and SwiGLU over the MLP's fused gate/up product. Each kernel is a wrapper over its
// body in llama_body.h, which the CPU emulation test (llama_cuda_emulation_test) runs; RMSNorm's
// are in layers.cu beside layer norm's.
#include <type_traits>

#include "layers_body.h"
#include "layers_cuda.h"
#include "llama_body.h"
#include "storage_elements.h"
#include "zero/core/cuda_check.h"

namespace zero::gpt2::cuda {
namespace {

using kernels::DeviceThread;
using kernels::launch_kernel;

template <typename T>
__global__ void rope_kernel(T* x, const float* table, std::int64_t rows, std::int64_t seq_len,
                            std::int64_t heads, std::int64_t head_dim, std::int64_t row_stride,
                            std::int64_t position_offset, float sign) {
  rope_body(DeviceThread{}, x, table, rows, seq_len, heads, head_dim, row_stride, position_offset,
            sign);
}

template <typename Out>
__global__ void swiglu_forward_kernel(Out* out, const float* inp, std::int64_t N, std::int64_t H) {
  swiglu_forward_body(DeviceThread{}, out, inp, N, H);
}

__global__ void swiglu_backward_kernel(float* dinp, const float* dout, const float* inp,
                                       std::int64_t N, std::int64_t H) {
  swiglu_backward_body(DeviceThread{}, dinp, dout, inp, N, H);
}

template <typename T>
__global__ void repeat_kv_forward_kernel(T* heads, const T* qkv, std::int64_t N, std::int64_t NH,
                                         std::int64_t KVH, std::int64_t HS) {
  repeat_kv_forward_body(DeviceThread{}, heads, qkv, N, NH, KVH, HS);
}

__global__ void repeat_kv_backward_kernel(float* dqkv, const float* dheads, std::int64_t N,
                                          std::int64_t NH, std::int64_t KVH, std::int64_t HS) {
  repeat_kv_backward_body(DeviceThread{}, dqkv, dheads, N, NH, KVH, HS);
}

}  // namespace

void repeat_kv_forward(void* heads, const void* qkv, DType dtype, std::int64_t N, std::int64_t NH,
                       std::int64_t KVH, std::int64_t HS, cudaStream_t stream) {
  if (N * NH * HS == 0) return;
  with_storage_type(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    launch_kernel(repeat_kv_forward_kernel<T>, elementwise_launch(N * 3 * NH * HS), stream,
                  static_cast<T*>(heads), static_cast<const T*>(qkv), N, NH, KVH, HS);
  });
  ZERO_CUDA_CHECK(cudaGetLastError());
}

void repeat_kv_backward(float* dqkv, const float* dheads, std::int64_t N, std::int64_t NH,
                        std::int64_t KVH, std::int64_t HS, cudaStream_t stream) {
  if (N * NH * HS == 0) return;
  launch_kernel(repeat_kv_backward_kernel, elementwise_launch(N * (NH + 2 * KVH) * HS), stream,
                dqkv, dheads, N, NH, KVH, HS);
  ZERO_CUDA_CHECK(cudaGetLastError());
}

void rope(void* x, DType dtype, const float* table, const RopeLayout& layout, bool backward,
          cudaStream_t stream) {
  const std::int64_t rows = layout.B * layout.T;
  const std::int64_t pairs = rows * layout.heads * (layout.head_dim / 2);
  if (pairs == 0) return;
  with_storage_type(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    launch_kernel(rope_kernel<T>, elementwise_launch(pairs), stream, static_cast<T*>(x), table,
                  rows, layout.T, layout.heads, layout.head_dim, layout.row_stride,
                  layout.position_offset, backward ? -1.0f : 1.0f);
  });
  ZERO_CUDA_CHECK(cudaGetLastError());
}

void swiglu_forward(void* out, DType out_dtype, const float* inp, std::int64_t N, std::int64_t H,
                    cudaStream_t stream) {
  if (N * H == 0) return;
  with_storage_type(out_dtype, [&](auto* tag) {
    using Out = std::remove_pointer_t<decltype(tag)>;
    launch_kernel(swiglu_forward_kernel<Out>, elementwise_launch(N * H), stream,
                  static_cast<Out*>(out), inp, N, H);
  });
  ZERO_CUDA_CHECK(cudaGetLastError());
}

void swiglu_backward(float* dinp, const float* dout, const float* inp, std::int64_t N,
                     std::int64_t H, cudaStream_t stream) {
  if (N * H == 0) return;
  launch_kernel(swiglu_backward_kernel, elementwise_launch(N * H), stream, dinp, dout, inp, N, H);
  ZERO_CUDA_CHECK(cudaGetLastError());
}

}  // namespace zero::gpt2::cuda
