// Tiled causal self-attention on CUDA (FlashAttention-2 style, fp32, no tensor cores): the forward
// keeps each row's log-sum-exp instead of the probabilities, the backward recomputes them tile by
// tile (D = dout · out per row from the saved out, then dk/dv by key tile and dq by query tile; no
// atomics). The kernels'
// bodies are attention_flash_body.h's and attention_flash_backward.h's; heads past 128 channels
// take the plain kernels (attention.cu).
#include <type_traits>

#include "attention_flash_backward.h"
#include "attention_flash_body.h"
#include "layers_cuda.h"
#include "zero/core/cuda_check.h"

namespace zero::gpt2::cuda {
namespace {

using kernels::DeviceThread;
using kernels::launch_kernel;

// Blocks per SM the register allocation leaves room for (ptxas caps registers to fit them): two
// (128 registers) for heads of 17 to 64 channels; HP 16 spills under that cap (its loops unroll
// fully), HP 128 needs more.
constexpr int flash_min_blocks(int HP) { return HP == 32 || HP == 64 ? 2 : 1; }

__device__ __forceinline__ float* flash_shared() {
  extern __shared__ float flash_shared_floats[];
  return flash_shared_floats;
}

template <int HP>
__launch_bounds__(kFlashThreads, flash_min_blocks(HP)) __global__
    void flash_forward_kernel(float* out, float* lse, const float* qkv, std::int64_t B,
                              std::int64_t T, std::int64_t C, std::int64_t NH,
                              DropoutSite dropout) {
  flash_forward_body<HP>(DeviceThread{}, flash_shared(), out, lse, qkv, B, T, C, NH, dropout);
}

__global__ void flash_delta_kernel(float* delta, const float* dout, const float* out,
                                   std::int64_t B, std::int64_t T, std::int64_t C,
                                   std::int64_t NH) {
  flash_delta_body(DeviceThread{}, delta, dout, out, B, T, C, NH);
}

template <int HP>
__launch_bounds__(kFlashThreads, flash_min_blocks(HP)) __global__
    void flash_dkv_kernel(float* dqkv, const float* dout, const float* qkv, const float* lse,
                          const float* delta, std::int64_t B, std::int64_t T, std::int64_t C,
                          std::int64_t NH, DropoutSite dropout) {
  flash_dkv_body<HP>(DeviceThread{}, flash_shared(), dqkv, dout, qkv, lse, delta, B, T, C, NH,
                     dropout);
}

template <int HP>
__launch_bounds__(kFlashThreads, flash_min_blocks(HP)) __global__
    void flash_dq_kernel(float* dqkv, const float* dout, const float* qkv, const float* lse,
                         const float* delta, std::int64_t B, std::int64_t T, std::int64_t C,
                         std::int64_t NH, DropoutSite dropout) {
  flash_dq_body<HP>(DeviceThread{}, flash_shared(), dqkv, dout, qkv, lse, delta, B, T, C, NH,
                    dropout);
}

// f(std::integral_constant<int, HP>) for head size HS's padded size.
template <typename F>
void with_head_bucket(const char* what, std::int64_t HS, F&& f) {
  switch (flash_head_bucket(HS)) {
    case 16: return f(std::integral_constant<int, 16>{});
    case 32: return f(std::integral_constant<int, 32>{});
    case 64: return f(std::integral_constant<int, 64>{});
    case 128: return f(std::integral_constant<int, 128>{});
    default:
      ZERO_THROW(what, ": head size ", HS, " has no tiled kernel (1 to ", kFlashMaxHead, ")");
  }
}

// Past 48 KiB of dynamic shared memory a kernel must opt in (per device; cheap to repeat).
template <typename... Params, typename... Args>
void launch_tiled(void (*kernel)(Params...), const kernels::LaunchConfig& config,
                  cudaStream_t stream, Args... args) {
  ZERO_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(config.dynamic_shared_bytes)));
  launch_kernel(kernel, config, stream, args...);
  ZERO_CUDA_CHECK(cudaGetLastError());
}

void check_tiled_shape(const char* what, std::int64_t B, std::int64_t C, std::int64_t NH) {
  ZERO_CHECK(NH > 0 && C % NH == 0, what, ": C = ", C, " is not a multiple of NH = ", NH);
  ZERO_CHECK(B * NH <= 65535, what, ": B · NH = ", B * NH, " is past the grid's 65535 heads");
}

}  // namespace

bool attention_is_tiled(std::int64_t HS) { return flash_head_bucket(HS) != 0; }

void attention_forward(float* out, float* att, const float* qkv, std::int64_t B, std::int64_t T,
                       std::int64_t C, std::int64_t NH, const DropoutSite& dropout,
                       cudaStream_t stream) {
  if (NH <= 0 || C % NH != 0 || !attention_is_tiled(C / NH)) {
    attention_plain_forward(out, att, qkv, B, T, C, NH, dropout, stream);
    return;
  }
  check_tiled_shape("attention_forward", B, C, NH);
  if (B * T * C == 0) return;
  with_head_bucket("attention_forward", C / NH, [&](auto bucket) {
    constexpr int HP = decltype(bucket)::value;
    launch_tiled(flash_forward_kernel<HP>, flash_launch(B, T, NH, FlashShared<HP>::kForward),
                 stream, out, att, qkv, B, T, C, NH, dropout);
  });
}

void attention_backward(float* dqkv, float* datt, const float* dout, const float* out,
                        const float* qkv, const float* att, std::int64_t B, std::int64_t T,
                        std::int64_t C, std::int64_t NH, const DropoutSite& dropout,
                        cudaStream_t stream) {
  if (NH <= 0 || C % NH != 0 || !attention_is_tiled(C / NH)) {
    attention_plain_backward(dqkv, datt, dout, qkv, att, B, T, C, NH, dropout, stream);
    return;
  }
  check_tiled_shape("attention_backward", B, C, NH);
  if (B * T * C == 0) return;
  ZERO_CHECK(out != nullptr,
             "attention_backward: the tiled kernels need the forward's out (B, T, C), got null");
  float* delta = datt;  // D = dout · out per row, datt's first B·NH·T floats
  launch_kernel(flash_delta_kernel, flash_delta_launch(B, T, NH), stream, delta, dout, out, B, T, C,
                NH);
  ZERO_CUDA_CHECK(cudaGetLastError());
  with_head_bucket("attention_backward", C / NH, [&](auto bucket) {
    constexpr int HP = decltype(bucket)::value;
    const float* lse = att;
    launch_tiled(flash_dkv_kernel<HP>, flash_launch(B, T, NH, FlashShared<HP>::kKeys), stream, dqkv,
                 dout, qkv, lse, static_cast<const float*>(delta), B, T, C, NH, dropout);
    launch_tiled(flash_dq_kernel<HP>, flash_launch(B, T, NH, FlashShared<HP>::kQueries), stream,
                 dqkv, dout, qkv, lse, static_cast<const float*>(delta), B, T, C, NH, dropout);
  });
}

}  // namespace zero::gpt2::cuda
