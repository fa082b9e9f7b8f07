// Plain causal self-attention on CUDA, forward and backward, with the CPU kernel's materialised
// (B, NH, T, T) probabilities and dropout masks: the reference the tiled kernels
// (attention_flash.cu) are measured against, and their fallback for heads past 128 channels.
// O(B·NH·T²·HS) work with no tiling. The kernels' bodies are attention_body.h's.
#include "attention_body.h"
#include "layers_cuda.h"
#include "zero/core/cuda_check.h"

namespace zero::gpt2::cuda {
namespace {

using kernels::DeviceThread;
using kernels::launch_kernel;

__global__ void attention_forward_kernel(float* out, float* att, const float* qkv, std::int64_t B,
                                         std::int64_t T, std::int64_t C, std::int64_t NH,
                                         DropoutSite dropout) {
  attention_forward_body(DeviceThread{}, out, att, qkv, B, T, C, NH, dropout);
}

__global__ void attention_dpre_kernel(float* datt, const float* dout, const float* qkv,
                                      const float* att, std::int64_t B, std::int64_t T,
                                      std::int64_t C, std::int64_t NH, DropoutSite dropout) {
  attention_dpre_body(DeviceThread{}, datt, dout, qkv, att, B, T, C, NH, dropout);
}

__global__ void attention_dqkv_kernel(float* dqkv, const float* datt, const float* dout,
                                      const float* qkv, const float* att, std::int64_t B,
                                      std::int64_t T, std::int64_t C, std::int64_t NH,
                                      DropoutSite dropout) {
  attention_dqkv_body(DeviceThread{}, dqkv, datt, dout, qkv, att, B, T, C, NH, dropout);
}

void check_shape(const char* what, std::int64_t C, std::int64_t NH) {
  ZERO_CHECK(NH > 0 && C % NH == 0, what, ": C = ", C, " is not a multiple of NH = ", NH);
}

}  // namespace

void attention_plain_forward(float* out, float* att, const float* qkv, std::int64_t B,
                             std::int64_t T, std::int64_t C, std::int64_t NH,
                             const DropoutSite& dropout, cudaStream_t stream) {
  check_shape("attention_plain_forward", C, NH);
  if (B * T * C == 0) return;
  launch_kernel(attention_forward_kernel, row_warp_launch(B * NH * T), stream, out, att, qkv, B, T,
                C, NH, dropout);
  ZERO_CUDA_CHECK(cudaGetLastError());
}

void attention_plain_backward(float* dqkv, float* datt, const float* dout, const float* qkv,
                              const float* att, std::int64_t B, std::int64_t T, std::int64_t C,
                              std::int64_t NH, const DropoutSite& dropout, cudaStream_t stream) {
  check_shape("attention_plain_backward", C, NH);
  if (B * T * C == 0) return;
  launch_kernel(attention_dpre_kernel, row_warp_launch(B * NH * T), stream, datt, dout, qkv, att, B,
                T, C, NH, dropout);
  launch_kernel(attention_dqkv_kernel, elementwise_launch(B * T * C), stream, dqkv,
                static_cast<const float*>(datt), dout, qkv, att, B, T, C, NH, dropout);
  ZERO_CUDA_CHECK(cudaGetLastError());
}

}  // namespace zero::gpt2::cuda
