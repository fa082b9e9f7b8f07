// Causal multi-head self-attention on CPU that keeps one log-sum-exp per (b, h, t) row instead of
// the (T, T) probabilities: each head's queries in blocks of kBlockRows rows, each block's scores
// against the keys it sees (0 .. its last row) in a per-thread (rows, T) buffer, the four products
// per block through cpu::gemm (single-threaded inside the OpenMP split). The backward recomputes
// each block's probabilities from the log-sum-exp (one more Q·Kᵀ). OpenMP over (b, h, block) in
// the forward and (b, h) in the backward, where a head's blocks add into the same dk and dv rows.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "zero/gpt2/layers_cpu.h"

namespace zero::gpt2::cpu {
namespace {

constexpr std::int64_t kBlockRows = 64;

// e^x for x ≤ 88 (Cephes' expf: x = n·ln 2 + r, |r| ≤ ln 2 / 2, a degree-5 polynomial for e^r,
// then 2^n from the exponent bits), within 2 ulp of std::exp and written so that `omp simd`
// loops vectorise it; inputs below -87 give about 1e-38 instead of underflowing.
inline float fast_exp(float x) {
  x = std::max(x, -87.0f);
  const float rounding = 12582912.0f;  // 1.5 · 2^23: adding it rounds to an integer
  const float n = (x * 1.44269504088896341f + rounding) - rounding;
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const auto bits = static_cast<std::uint32_t>(static_cast<std::int32_t>(n) + 127) << 23;
  return p * std::bit_cast<float>(bits);
}

// A thread's (rows, columns) block of scores with every row on a 64-byte boundary (a row stride
// of padded(columns) floats): the vectorised row sums then group their terms the same way on
// every thread and call. Were the grouping to follow where the allocator put the buffer, activation
// checkpointing's recomputed forward would differ from the first in the last bit.
class RowBlock {
 public:
  RowBlock(std::int64_t rows, std::int64_t columns)
      : storage_(static_cast<std::size_t>(rows * padded(columns) + kAlignFloats)) {}
  static std::int64_t padded(std::int64_t columns) {
    return (columns + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
  }
  float* data() {
    const auto address = reinterpret_cast<std::uintptr_t>(storage_.data());
    const std::uintptr_t mask = kAlignFloats * sizeof(float) - 1;
    return reinterpret_cast<float*>((address + mask) & ~mask);
  }

 private:
  static constexpr std::int64_t kAlignFloats = 16;
  std::vector<float> storage_;
};

// One head's view of qkv (B, T, 3C) and of the (B, T, C) tensors out and dout.
struct Head {
  std::int64_t row_stride;  // 3C
  const float* q;           // (T, HS) rows of row_stride
  const float* k;
  const float* v;
};

Head head_of(const float* qkv, std::int64_t b, std::int64_t h, std::int64_t T, std::int64_t C,
             std::int64_t HS) {
  const float* base = qkv + b * T * 3 * C + h * HS;
  return {3 * C, base, base + C, base + 2 * C};
}

// The dropout factor (0 or 1 / (1 - p)) of probability (b, t, h, t2), 1 without dropout.
inline float dropout_factor(const DropoutSite& dropout, std::uint64_t row_key, std::int64_t h,
                            std::int64_t T, std::int64_t t2) {
  if (!dropout.active()) return 1.0f;
  return dropout.keep(row_key, h * T + t2) ? dropout.scale() : 0.0f;
}

}  // namespace

void flash_attention_forward(float* out, float* lse, const float* qkv, std::int64_t B,
                             std::int64_t T, std::int64_t C, std::int64_t NH,
                             const DropoutSite& dropout) {
  const std::int64_t HS = C / NH, blocks = (T + kBlockRows - 1) / kBlockRows;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
#pragma omp parallel
  {
    RowBlock scores(std::min(T, kBlockRows), T);
#pragma omp for collapse(3) schedule(dynamic, 1)
    for (std::int64_t b = 0; b < B; ++b) {
      for (std::int64_t h = 0; h < NH; ++h) {
        for (std::int64_t block = 0; block < blocks; ++block) {
          const Head head = head_of(qkv, b, h, T, C, HS);
          const std::int64_t t0 = block * kBlockRows, rows = std::min(kBlockRows, T - t0);
          const std::int64_t keys = t0 + rows, ld = head.row_stride;
          const std::int64_t ls = RowBlock::padded(keys);
          float* s = scores.data();
          // s (rows, keys) = q · kᵀ · scale, then each row's causal softmax in place.
          gemm(false, true, rows, keys, HS, scale, head.q + t0 * ld, ld, head.k, ld, 0.0f, s, ls);
          for (std::int64_t r = 0; r < rows; ++r) {
            float* row = s + r * ls;
            const std::int64_t t = t0 + r, seen = t + 1;
            float max = -INFINITY;
            for (std::int64_t j = 0; j < seen; ++j) max = std::max(max, row[j]);
            float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
            for (std::int64_t j = 0; j < seen; ++j) {
              row[j] = fast_exp(row[j] - max);
              sum += row[j];
            }
            lse[(b * NH + h) * T + t] = max + std::log(sum);
            const float inverse = 1.0f / sum;
            const std::uint64_t key = dropout.active() ? dropout.row_key(b, t) : 0;
            for (std::int64_t j = 0; j < seen; ++j)
              row[j] *= inverse * dropout_factor(dropout, key, h, T, j);
            std::fill(row + seen, row + keys, 0.0f);
          }
          // out (rows, HS) = dropout(p) · v.
          gemm(false, false, rows, HS, keys, 1.0f, s, ls, head.v, ld, 0.0f,
               out + (b * T + t0) * C + h * HS, C);
        }
      }
    }
  }
}

void flash_attention_backward(float* dqkv, const float* dout, const float* qkv, const float* lse,
                              std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH,
                              const DropoutSite& dropout) {
  const std::int64_t HS = C / NH, blocks = (T + kBlockRows - 1) / kBlockRows;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
#pragma omp parallel
  {
    const std::int64_t block_rows = std::min(T, kBlockRows);
    RowBlock probabilities(block_rows, T), dscores(block_rows, T);
    RowBlock factors(dropout.active() ? block_rows : 0, T);
#pragma omp for collapse(2) schedule(dynamic, 1)
    for (std::int64_t b = 0; b < B; ++b) {
      for (std::int64_t h = 0; h < NH; ++h) {
        const Head head = head_of(qkv, b, h, T, C, HS);
        const std::int64_t ld = head.row_stride;
        float* dq = dqkv + b * T * 3 * C + h * HS;
        float* dk = dq + C;
        float* dv = dq + 2 * C;
        for (std::int64_t t = 0; t < T; ++t) {
          std::memset(dk + t * ld, 0, HS * sizeof(float));
          std::memset(dv + t * ld, 0, HS * sizeof(float));
        }
        for (std::int64_t block = 0; block < blocks; ++block) {
          const std::int64_t t0 = block * kBlockRows, rows = std::min(kBlockRows, T - t0);
          const std::int64_t keys = t0 + rows, ls = RowBlock::padded(keys);
          const float* dy = dout + (b * T + t0) * C + h * HS;
          float* p = probabilities.data();
          float* ds = dscores.data();
          // p = the forward's probabilities (from its log-sum-exp), ds = dout · vᵀ (the gradient
          // of the dropped-out probabilities).
          gemm(false, true, rows, keys, HS, scale, head.q + t0 * ld, ld, head.k, ld, 0.0f, p, ls);
          gemm(false, true, rows, keys, HS, 1.0f, dy, C, head.v, ld, 0.0f, ds, ls);
          for (std::int64_t r = 0; r < rows; ++r) {
            const std::int64_t t = t0 + r, seen = t + 1;
            float* p_row = p + r * ls;
            float* ds_row = ds + r * ls;
            const float row_lse = lse[(b * NH + h) * T + t];
            float* factor = dropout.active() ? factors.data() + r * ls : nullptr;
            if (factor != nullptr) {
              const std::uint64_t key = dropout.row_key(b, t);
              for (std::int64_t j = 0; j < seen; ++j)
                factor[j] = dropout_factor(dropout, key, h, T, j);
            }
            // dp = ds · mask (the probabilities' gradient); D = Σ p · dp.
            float row_sum = 0.0f;
#pragma omp simd reduction(+ : row_sum)
            for (std::int64_t j = 0; j < seen; ++j) {
              p_row[j] = fast_exp(p_row[j] - row_lse);
              if (factor != nullptr) ds_row[j] *= factor[j];
              row_sum += p_row[j] * ds_row[j];
            }
            // ds = p · (dp - D) · scale (the scores' gradient); p becomes dropout(p) for dv.
#pragma omp simd
            for (std::int64_t j = 0; j < seen; ++j) {
              ds_row[j] = p_row[j] * (ds_row[j] - row_sum) * scale;
              if (factor != nullptr) p_row[j] *= factor[j];
            }
            std::fill(p_row + seen, p_row + keys, 0.0f);
            std::fill(ds_row + seen, ds_row + keys, 0.0f);
          }
          // dv += dropout(p)ᵀ · dout, dq = ds · k, dk += dsᵀ · q.
          gemm(true, false, keys, HS, rows, 1.0f, p, ls, dy, C, 1.0f, dv, ld);
          gemm(false, false, rows, HS, keys, 1.0f, ds, ls, head.k, ld, 0.0f, dq + t0 * ld, ld);
          gemm(true, false, keys, HS, rows, 1.0f, ds, ls, head.q + t0 * ld, ld, 1.0f, dk, ld);
        }
      }
    }
  }
}

}  // namespace zero::gpt2::cpu
