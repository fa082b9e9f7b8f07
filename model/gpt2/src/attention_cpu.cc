// Causal multi-head self-attention on CPU, forward and backward, OpenMP over (batch, head).
// Inner loops over the head dimension are `omp simd` (the reductions would not vectorise
// otherwise). Each (b, h) pair owns its head's columns of q, k, v and dq, dk, dv, so threads never
// race.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "zero/gpt2/layers_cpu.h"

namespace zero::gpt2::cpu {
namespace {

// a[t] (t < positions) = softmax over t of q · k_t · scale, the key of position t at
// keys + t · key_stride: one query row's attention probabilities.
inline void softmax_row(float* a, const float* q, const float* keys, std::int64_t key_stride,
                        std::int64_t positions, std::int64_t HS, float scale) {
  float max = -INFINITY;
  for (std::int64_t t = 0; t < positions; ++t) {
    const float* k = keys + t * key_stride;
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (std::int64_t i = 0; i < HS; ++i) dot += q[i] * k[i];
    dot *= scale;
    a[t] = dot;
    max = std::max(max, dot);
  }
  float sum = 0.0f;
  for (std::int64_t t = 0; t < positions; ++t) {
    a[t] = std::exp(a[t] - max);
    sum += a[t];
  }
  const float inverse = 1.0f / sum;
  for (std::int64_t t = 0; t < positions; ++t) a[t] *= inverse;
}

}  // namespace

void attention_forward(float* out, float* att, const float* qkv, std::int64_t B, std::int64_t T,
                       std::int64_t C, std::int64_t NH, const DropoutSite& dropout) {
  const std::int64_t HS = C / NH, C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  const float keep_scale = dropout.active() ? dropout.scale() : 1.0f;
#pragma omp parallel for collapse(2) schedule(static)
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t h = 0; h < NH; ++h) {
      for (std::int64_t t = 0; t < T; ++t) {
        const float* q = qkv + (b * T + t) * C3 + h * HS;
        float* a = att + ((b * NH + h) * T + t) * T;
        softmax_row(a, q, qkv + b * T * C3 + C + h * HS, C3, t + 1, HS, scale);
        for (std::int64_t t2 = t + 1; t2 < T; ++t2) a[t2] = 0.0f;

        float* y = out + (b * T + t) * C + h * HS;
        for (std::int64_t i = 0; i < HS; ++i) y[i] = 0.0f;
        const std::uint64_t key = dropout.active() ? dropout.row_key(b, t) : 0;
        for (std::int64_t t2 = 0; t2 <= t; ++t2) {
          float weight = a[t2];
          if (dropout.active()) weight = dropout.keep(key, h * T + t2) ? weight * keep_scale : 0.0f;
          const float* v = qkv + (b * T + t2) * C3 + 2 * C + h * HS;
#pragma omp simd
          for (std::int64_t i = 0; i < HS; ++i) y[i] += weight * v[i];
        }
      }
    }
  }
}

void attention_backward(float* dqkv, float* datt, const float* dout, const float* qkv,
                        const float* att, std::int64_t B, std::int64_t T, std::int64_t C,
                        std::int64_t NH, const DropoutSite& dropout) {
  const std::int64_t HS = C / NH, C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  const float keep_scale = dropout.active() ? dropout.scale() : 1.0f;
#pragma omp parallel for collapse(2) schedule(static)
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t h = 0; h < NH; ++h) {
      for (std::int64_t t = 0; t < T; ++t) {
        float* row = dqkv + (b * T + t) * C3 + h * HS;
        std::memset(row, 0, HS * sizeof(float));
        std::memset(row + C, 0, HS * sizeof(float));
        std::memset(row + 2 * C, 0, HS * sizeof(float));
      }
      for (std::int64_t t = 0; t < T; ++t) {
        const float* a = att + ((b * NH + h) * T + t) * T;
        float* da = datt + ((b * NH + h) * T + t) * T;
        const float* dy = dout + (b * T + t) * C + h * HS;
        const std::uint64_t key = dropout.active() ? dropout.row_key(b, t) : 0;
        // Through y = dropout(att) · v: datt and dv.
        for (std::int64_t t2 = 0; t2 <= t; ++t2) {
          const float* v = qkv + (b * T + t2) * C3 + 2 * C + h * HS;
          float* dv = dqkv + (b * T + t2) * C3 + 2 * C + h * HS;
          float mask_scale = 1.0f;
          if (dropout.active()) mask_scale = dropout.keep(key, h * T + t2) ? keep_scale : 0.0f;
          const float weight = a[t2] * mask_scale;
          float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
          for (std::int64_t i = 0; i < HS; ++i) {
            dot += dy[i] * v[i];
            dv[i] += weight * dy[i];
          }
          da[t2] = dot * mask_scale;
        }
        // Through the softmax: dpre = att · (datt - Σ att·datt), then q·kᵀ.
        float dot_sum = 0.0f;
        for (std::int64_t t2 = 0; t2 <= t; ++t2) dot_sum += a[t2] * da[t2];
        const float* q = qkv + (b * T + t) * C3 + h * HS;
        float* dq = dqkv + (b * T + t) * C3 + h * HS;
        for (std::int64_t t2 = 0; t2 <= t; ++t2) {
          const float dpre = a[t2] * (da[t2] - dot_sum) * scale;
          const float* k = qkv + (b * T + t2) * C3 + C + h * HS;
          float* dk = dqkv + (b * T + t2) * C3 + C + h * HS;
#pragma omp simd
          for (std::int64_t i = 0; i < HS; ++i) {
            dq[i] += dpre * k[i];
            dk[i] += dpre * q[i];
          }
        }
      }
    }
  }
}

// Each (query row, head) pair owns its output head; the scores live in the thread's own buffer.
void cached_attention_forward(const CachedAttention& call) {
  const std::int64_t group = call.NH / call.KVH, HS = call.HS, NH = call.NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
#pragma omp parallel
  {
    std::vector<float> scores(static_cast<std::size_t>(call.first_position + call.Q));
#pragma omp for collapse(2) schedule(static)
    for (std::int64_t i = 0; i < call.Q; ++i) {
      for (std::int64_t h = 0; h < NH; ++h) {
        const float* q = call.q + i * call.q_stride + h * HS;
        const float* keys = call.keys + (h / group) * call.max_positions * HS;
        const float* values = call.values + (h / group) * call.max_positions * HS;
        const std::int64_t positions = call.first_position + i + 1;
        float* a = scores.data();
        softmax_row(a, q, keys, HS, positions, HS, scale);
        float* y = call.out + (i * NH + h) * HS;
        for (std::int64_t c = 0; c < HS; ++c) y[c] = 0.0f;
        for (std::int64_t t = 0; t < positions; ++t) {
          const float* v = values + t * HS;
#pragma omp simd
          for (std::int64_t c = 0; c < HS; ++c) y[c] += a[t] * v[c];
        }
      }
    }
  }
}

}  // namespace zero::gpt2::cpu
