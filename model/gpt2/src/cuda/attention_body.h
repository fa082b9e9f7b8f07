// The bodies of the plain causal attention kernels in attention.cu (forward, the softmax's
// backward, dq/dk/dv), templated on the thread (zero/core/kernel_thread.h) so the CPU emulation
// test runs them over their launch grids; launch configurations are layers_body.h's (a warp per
// (b, h, t) row; a thread per element of dqkv). C++17 for nvcc.
#pragma once

#include <cstdint>

#include "layers_body.h"

namespace zero::gpt2::cuda {

// The dropout factor of attention weight (t, t2) of head h: 0 or 1/(1-p); 1 without dropout.
ZERO_HOST_DEVICE_INLINE float attention_mask(const DropoutSite& dropout, std::int64_t b,
                                             std::int64_t t, std::int64_t h, std::int64_t t2,
                                             std::int64_t T) {
  if (!dropout.active()) return 1.0f;
  return dropout.keep(dropout.row_key(b, t), static_cast<std::uint64_t>(h * T + t2))
             ? dropout.scale()
             : 0.0f;
}

// One warp per (b, h, t): scores over t2 <= t (a lane per t2), softmax, then y (a lane per
// channel of the head).
template <typename Thread>
ZERO_HOST_DEVICE void attention_forward_body(const Thread& thread, float* out, float* att,
                                             const float* qkv, std::int64_t B, std::int64_t T,
                                             std::int64_t C, std::int64_t NH,
                                             const DropoutSite& dropout) {
  const std::int64_t row = warp_row(thread);
  if (row >= B * NH * T) return;
  const int lane = kernels::lane_of(thread);
  const std::int64_t t = row % T, h = (row / T) % NH, b = row / (T * NH);
  const std::int64_t HS = C / NH, C3 = 3 * C;
  const float scale = 1.0f / sqrtf(static_cast<float>(HS));
  const float* q = qkv + (b * T + t) * C3 + h * HS;
  float* a = att + row * T;
  float max = -INFINITY;
  for (std::int64_t t2 = lane; t2 <= t; t2 += kWarpSize) {
    const float* k = qkv + (b * T + t2) * C3 + C + h * HS;
    float dot = 0.0f;
    for (std::int64_t i = 0; i < HS; ++i) dot += q[i] * k[i];
    dot *= scale;
    a[t2] = dot;
    max = fmaxf(max, dot);
  }
  max = kernels::warp_max(thread, max);
  float sum = 0.0f;
  for (std::int64_t t2 = lane; t2 <= t; t2 += kWarpSize) {
    const float e = expf(a[t2] - max);
    a[t2] = e;
    sum += e;
  }
  const float inverse = 1.0f / kernels::warp_sum(thread, sum);
  for (std::int64_t t2 = lane; t2 < T; t2 += kWarpSize) a[t2] = t2 <= t ? a[t2] * inverse : 0.0f;
  thread.sync_warp();  // every lane reads every weight below
  float* y = out + (b * T + t) * C + h * HS;
  for (std::int64_t i = lane; i < HS; i += kWarpSize) {
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
template <typename Thread>
ZERO_HOST_DEVICE void attention_dpre_body(const Thread& thread, float* datt, const float* dout,
                                          const float* qkv, const float* att, std::int64_t B,
                                          std::int64_t T, std::int64_t C, std::int64_t NH,
                                          const DropoutSite& dropout) {
  const std::int64_t row = warp_row(thread);
  if (row >= B * NH * T) return;
  const int lane = kernels::lane_of(thread);
  const std::int64_t t = row % T, h = (row / T) % NH, b = row / (T * NH);
  const std::int64_t HS = C / NH, C3 = 3 * C;
  const float scale = 1.0f / sqrtf(static_cast<float>(HS));
  const float* a = att + row * T;
  float* da = datt + row * T;
  const float* dy = dout + (b * T + t) * C + h * HS;
  float dot_sum = 0.0f;
  for (std::int64_t t2 = lane; t2 <= t; t2 += kWarpSize) {
    const float* v = qkv + (b * T + t2) * C3 + 2 * C + h * HS;
    float dot = 0.0f;
    for (std::int64_t i = 0; i < HS; ++i) dot += dy[i] * v[i];
    const float value = dot * attention_mask(dropout, b, t, h, t2, T);
    da[t2] = value;
    dot_sum += a[t2] * value;
  }
  dot_sum = kernels::warp_sum(thread, dot_sum);
  for (std::int64_t t2 = lane; t2 < T; t2 += kWarpSize)
    da[t2] = t2 <= t ? a[t2] * (da[t2] - dot_sum) * scale : 0.0f;
}

// One thread per (b, t, h, i): dq(t) = Σ_{t2<=t} dpre(t, t2) k(t2); dk(t) = Σ_{t3>=t} dpre(t3, t)
// q(t3); dv(t) = Σ_{t3>=t} att(t3, t) mask(t3, t) dy(t3). Overwrites dqkv.
template <typename Thread>
ZERO_HOST_DEVICE void attention_dqkv_body(const Thread& thread, float* dqkv, const float* datt,
                                          const float* dout, const float* qkv, const float* att,
                                          std::int64_t B, std::int64_t T, std::int64_t C,
                                          std::int64_t NH, const DropoutSite& dropout) {
  const std::int64_t index = global_x(thread);
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

}  // namespace zero::gpt2::cuda
