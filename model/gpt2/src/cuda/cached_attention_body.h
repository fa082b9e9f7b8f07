// The body of generation's CUDA attention over a KV cache (cached_attention.cu): one warp per
// (query row, head), the lanes owning the head's channels c = lane + 32·j, one pass over the
// cached positions with a running maximum and sum (the online softmax), so nothing per position is
// stored. A `__host__ __device__` function templated on the thread (zero/core/kernel_thread.h),
// which tests/model/llama_cuda_emulation_test.cc runs over row_warp_launch's grid against
// cpu::cached_attention_forward. C++17 for nvcc.
#pragma once

#include <cmath>
#include <cstdint>

#include "layers_body.h"
#include "zero/core/kernel_thread.h"
#include "zero/gpt2/cached_attention.h"

namespace zero::gpt2::cuda {

// Channels per lane: heads up to kWarpSize · 8 = 256 channels (kernels.h
// kCachedAttentionMaxHeadSize).
constexpr int kCachedChannelsPerLane = 8;

// The launch: one warp per (query row, head), row_warp_launch's blocks.
constexpr LaunchConfig cached_attention_launch(std::int64_t Q, std::int64_t NH) {
  return row_warp_launch(Q * NH);
}

template <typename Thread>
ZERO_HOST_DEVICE void cached_attention_body(const Thread& thread, const CachedAttention& a) {
  const std::int64_t row = warp_row(thread);
  if (row >= a.Q * a.NH) return;  // the whole warp: a row is a warp's
  const int lane = kernels::lane_of(thread);
  const std::int64_t i = row / a.NH, h = row % a.NH, HS = a.HS;
  const std::int64_t kv = h / (a.NH / a.KVH);
  const float* q = a.q + i * a.q_stride + h * HS;
  const float* keys = a.keys + kv * a.max_positions * HS;
  const float* values = a.values + kv * a.max_positions * HS;
  const float scale = 1.0f / sqrtf(static_cast<float>(HS));
  float query[kCachedChannelsPerLane], sum_v[kCachedChannelsPerLane];
  ZERO_UNROLL
  for (int j = 0; j < kCachedChannelsPerLane; ++j) {
    const std::int64_t c = lane + j * kWarpSize;
    query[j] = c < HS ? q[c] : 0.0f;
    sum_v[j] = 0.0f;
  }
  float max = -INFINITY, sum = 0.0f;
  const std::int64_t positions = a.first_position + i + 1;
  for (std::int64_t t = 0; t < positions; ++t) {
    float partial = 0.0f;
    ZERO_UNROLL
    for (int j = 0; j < kCachedChannelsPerLane; ++j) {
      const std::int64_t c = lane + j * kWarpSize;
      if (c < HS) partial += query[j] * keys[t * HS + c];
    }
    const float score = kernels::warp_sum(thread, partial) * scale;
    const float next_max = fmaxf(max, score);
    const float rescale = expf(max - next_max);  // 0 at the first position (max = -inf)
    const float weight = expf(score - next_max);
    sum = sum * rescale + weight;
    ZERO_UNROLL
    for (int j = 0; j < kCachedChannelsPerLane; ++j) {
      const std::int64_t c = lane + j * kWarpSize;
      if (c < HS) sum_v[j] = sum_v[j] * rescale + weight * values[t * HS + c];
    }
    max = next_max;
  }
  float* y = a.out + (i * a.NH + h) * HS;
  ZERO_UNROLL
  for (int j = 0; j < kCachedChannelsPerLane; ++j) {
    const std::int64_t c = lane + j * kWarpSize;
    if (c < HS) y[c] = sum_v[j] / sum;
  }
}

}  // namespace zero::gpt2::cuda
