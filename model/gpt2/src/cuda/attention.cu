// Plain causal self-attention on CUDA, forward and backward, with the CPU kernel's materialised
// (B, NH, T, T) probabilities and dropout masks: the fallback beside cuDNN's fused attention and
// the reference it is tested against on the device. O(B·NH·T²·HS) work with no tiling.
#include <algorithm>
#include <cmath>

#include "layers_cuda.h"
#include "zero/core/cuda_check.h"

namespace zero::gpt2::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kThreads = 256;
constexpr int kRowsPerBlock = kThreads / kWarp;

__device__ __forceinline__ float warp_sum(float value) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

__device__ __forceinline__ float warp_max(float value) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

// The dropout factor of attention weight (t, t2) of head h: 0 or 1/(1-p); 1 without dropout.
__device__ __forceinline__ float attention_mask(const DropoutSite& dropout, std::int64_t b,
                                                std::int64_t t, std::int64_t h, std::int64_t t2,
                                                std::int64_t T) {
  if (!dropout.active()) return 1.0f;
  return dropout.keep(dropout.row_key(b, t), static_cast<std::uint64_t>(h * T + t2))
             ? dropout.scale()
             : 0.0f;
}

// One warp per (b, h, t): scores over t2 <= t (a lane per t2), softmax, then y (a lane per
// channel of the head).
__global__ void attention_forward_kernel(float* out, float* att, const float* qkv, std::int64_t B,
                                         std::int64_t T, std::int64_t C, std::int64_t NH,
                                         DropoutSite dropout) {
  const std::int64_t row =
      static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  if (row >= B * NH * T) return;
  const int lane = threadIdx.x % kWarp;
  const std::int64_t t = row % T, h = (row / T) % NH, b = row / (T * NH);
  const std::int64_t HS = C / NH, C3 = 3 * C;
  const float scale = 1.0f / sqrtf(static_cast<float>(HS));
  const float* q = qkv + (b * T + t) * C3 + h * HS;
  float* a = att + row * T;
  float max = -INFINITY;
  for (std::int64_t t2 = lane; t2 <= t; t2 += kWarp) {
    const float* k = qkv + (b * T + t2) * C3 + C + h * HS;
    float dot = 0.0f;
    for (std::int64_t i = 0; i < HS; ++i) dot += q[i] * k[i];
    dot *= scale;
    a[t2] = dot;
    max = fmaxf(max, dot);
  }
  max = warp_max(max);
  float sum = 0.0f;
  for (std::int64_t t2 = lane; t2 <= t; t2 += kWarp) {
    const float e = expf(a[t2] - max);
    a[t2] = e;
    sum += e;
  }
  const float inverse = 1.0f / warp_sum(sum);
  for (std::int64_t t2 = lane; t2 < T; t2 += kWarp) a[t2] = t2 <= t ? a[t2] * inverse : 0.0f;
  __syncwarp();  // every lane reads every weight below
  float* y = out + (b * T + t) * C + h * HS;
  for (std::int64_t i = lane; i < HS; i += kWarp) {
    float value = 0.0f;
    for (std::int64_t t2 = 0; t2 <= t; ++t2) {
      const float weight = a[t2] * attention_mask(dropout, b, t, h, t2, T);
      value += weight * qkv[(b * T + t2) * C3 + 2 * C + h * HS + i];
    }
    y[i] = value;
  }
}

// One warp per (b, h, t): datt(t, t2) = dy·v(t2) · mask, then the softmax's backward; datt holds
// dpre = att · (datt - Σ att·datt) · scale afterwards (0 past t).
__global__ void attention_dpre_kernel(float* datt, const float* dout, const float* qkv,
                                      const float* att, std::int64_t B, std::int64_t T,
                                      std::int64_t C, std::int64_t NH, DropoutSite dropout) {
  const std::int64_t row =
      static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  if (row >= B * NH * T) return;
  const int lane = threadIdx.x % kWarp;
  const std::int64_t t = row % T, h = (row / T) % NH, b = row / (T * NH);
  const std::int64_t HS = C / NH, C3 = 3 * C;
  const float scale = 1.0f / sqrtf(static_cast<float>(HS));
  const float* a = att + row * T;
  float* da = datt + row * T;
  const float* dy = dout + (b * T + t) * C + h * HS;
  float dot_sum = 0.0f;
  for (std::int64_t t2 = lane; t2 <= t; t2 += kWarp) {
    const float* v = qkv + (b * T + t2) * C3 + 2 * C + h * HS;
    float dot = 0.0f;
    for (std::int64_t i = 0; i < HS; ++i) dot += dy[i] * v[i];
    const float value = dot * attention_mask(dropout, b, t, h, t2, T);
    da[t2] = value;
    dot_sum += a[t2] * value;
  }
  dot_sum = warp_sum(dot_sum);
  for (std::int64_t t2 = lane; t2 < T; t2 += kWarp)
    da[t2] = t2 <= t ? a[t2] * (da[t2] - dot_sum) * scale : 0.0f;
}

// One thread per (b, t, h, i): dq(t) = Σ_{t2<=t} dpre(t, t2) k(t2); dk(t) = Σ_{t3>=t} dpre(t3, t)
// q(t3); dv(t) = Σ_{t3>=t} att(t3, t) mask(t3, t) dy(t3). Overwrites dqkv.
__global__ void attention_dqkv_kernel(float* dqkv, const float* datt, const float* dout,
                                      const float* qkv, const float* att, std::int64_t B,
                                      std::int64_t T, std::int64_t C, std::int64_t NH,
                                      DropoutSite dropout) {
  const std::int64_t index = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= B * T * C) return;
  const std::int64_t HS = C / NH, C3 = 3 * C;
  const std::int64_t channel = index % C, t = (index / C) % T, b = index / (C * T);
  const std::int64_t h = channel / HS, i = channel % HS;
  const float* head_dpre = datt + (b * NH + h) * T * T;
  const float* head_att = att + (b * NH + h) * T * T;
  float dq = 0.0f;
  for (std::int64_t t2 = 0; t2 <= t; ++t2)
    dq += head_dpre[t * T + t2] * qkv[(b * T + t2) * C3 + C + h * HS + i];
  float dk = 0.0f, dv = 0.0f;
  for (std::int64_t t3 = t; t3 < T; ++t3) {
    dk += head_dpre[t3 * T + t] * qkv[(b * T + t3) * C3 + h * HS + i];
    dv += head_att[t3 * T + t] * attention_mask(dropout, b, t3, h, t, T) *
          dout[(b * T + t3) * C + h * HS + i];
  }
  float* row = dqkv + (b * T + t) * C3 + h * HS + i;
  row[0] = dq;
  row[C] = dk;
  row[2 * C] = dv;
}

int grid_for(std::int64_t work, int per_block) {
  return static_cast<int>(std::max<std::int64_t>(1, (work + per_block - 1) / per_block));
}

void check_shape(const char* what, std::int64_t C, std::int64_t NH) {
  ZERO_CHECK(NH > 0 && C % NH == 0, what, ": C = ", C, " is not a multiple of NH = ", NH);
}

}  // namespace

void attention_forward(float* out, float* att, const float* qkv, std::int64_t B, std::int64_t T,
                       std::int64_t C, std::int64_t NH, const DropoutSite& dropout,
                       cudaStream_t stream) {
  check_shape("attention_forward", C, NH);
  if (B * T * C == 0) return;
  attention_forward_kernel<<<grid_for(B * NH * T, kRowsPerBlock), kThreads, 0, stream>>>(
      out, att, qkv, B, T, C, NH, dropout);
  ZERO_CUDA_CHECK(cudaGetLastError());
}

void attention_backward(float* dqkv, float* datt, const float* dout, const float* qkv,
                        const float* att, std::int64_t B, std::int64_t T, std::int64_t C,
                        std::int64_t NH, const DropoutSite& dropout, cudaStream_t stream) {
  check_shape("attention_backward", C, NH);
  if (B * T * C == 0) return;
  attention_dpre_kernel<<<grid_for(B * NH * T, kRowsPerBlock), kThreads, 0, stream>>>(
      datt, dout, qkv, att, B, T, C, NH, dropout);
  attention_dqkv_kernel<<<grid_for(B * T * C, kThreads), kThreads, 0, stream>>>(
      dqkv, datt, dout, qkv, att, B, T, C, NH, dropout);
  ZERO_CUDA_CHECK(cudaGetLastError());
}

}  // namespace zero::gpt2::cuda
