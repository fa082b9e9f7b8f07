// Causal multi-head self-attention on CPU that keeps one log-sum-exp per (b, h, t) row instead of
// the (T, T) probabilities: each head's queries in blocks of kBlockRows rows, each block's scores
// against the keys it sees (0 .. its last row) in a per-thread (rows, T) block, the products per
// block through cpu::gemm, or gemm_bf16 on bf16 copies of q, k, v and dout (single-threaded inside
// the OpenMP split). The backward recomputes each block's probabilities from the log-sum-exp (one
// more Q·Kᵀ). OpenMP over (b, h, block) in the forward and (b, h) in the backward, where a head's
// blocks add into the same dk and dv rows. The per-thread blocks are the caller's
// (FlashAttentionScratch: GPT2Compute's planned workspace) or the kernels' own.
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "zero/core/error.h"
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

// Blocks of scores are (rows, columns) with a row stride of padded(columns) elements, so that
// every fp32 row starts on a 64-byte boundary: the vectorised row sums then group their terms the
// same way on every thread and call. Were the grouping to follow where a buffer lies, activation
// checkpointing's recomputed forward would differ from the first in the last bit.
constexpr std::int64_t kAlignBytes = 64;
std::int64_t padded(std::int64_t columns) {
  constexpr std::int64_t kAlignFloats = kAlignBytes / sizeof(float);
  return (columns + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
}
std::int64_t aligned(std::int64_t bytes) {
  return (bytes + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
}

// One thread's blocks of (min(T, kBlockRows), padded(T)): three fp32 (the scores or
// probabilities, the scores' gradient, the backward's dropout factors) and, for bf16 products,
// two bf16 (the probabilities and the scores' gradient as the products read them).
constexpr int kFp32Blocks = 3, kBf16Blocks = 2;
std::int64_t block_bytes(std::int64_t T, std::int64_t element_bytes) {
  return aligned(std::min(T, kBlockRows) * padded(T) * element_bytes);
}
std::int64_t thread_bytes(std::int64_t T, bool bf16) {
  return kFp32Blocks * block_bytes(T, sizeof(float)) +
         (bf16 ? kBf16Blocks * block_bytes(T, sizeof(BFloat16)) : 0);
}
struct ThreadBlocks {
  float* fp32[kFp32Blocks];
  BFloat16* bf16[kBf16Blocks];
};

// The scratch a call runs with: the caller's (FlashAttentionScratch) or, where it gives none, the
// kernels' own; and q, k, v (and dout) rounded to bf16 there for bf16 products.
class Workspace {
 public:
  Workspace(const FlashAttentionScratch& scratch, const float* qkv, const float* dout,
            std::int64_t B, std::int64_t T, std::int64_t C)
      : bf16_(scratch.bf16), T_(T) {
    const std::int64_t per_thread = thread_bytes(T, bf16_);
    auto* blocks = static_cast<std::byte*>(scratch.blocks);
    std::int64_t bytes = scratch.blocks_bytes;
    if (blocks == nullptr) {
      bytes = flash_attention_blocks_bytes(T, bf16_, omp_get_max_threads());
      own_blocks_.resize(static_cast<std::size_t>(bytes));
      blocks = own_blocks_.data();
    }
    // Slots of per_thread bytes after the first 64-byte boundary, at most kAlignBytes past
    // `blocks` (flash_attention_blocks_bytes counts it).
    ZERO_CHECK(bytes >= per_thread + kAlignBytes, "flash attention: ", bytes,
               " bytes of blocks; one thread takes ", per_thread + kAlignBytes, " at T ", T);
    const auto address = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(blocks));
    base_ = blocks + (aligned(address) - address);
    threads_ = static_cast<int>(
        std::min<std::int64_t>(omp_get_max_threads(), (bytes - kAlignBytes) / per_thread));
    if (!bf16_) return;
    qkv16_ = scratch.staged_qkv;
    if (qkv16_ == nullptr) {
      own_qkv16_.resize(static_cast<std::size_t>(B * T * 3 * C));
      qkv16_ = own_qkv16_.data();
    }
    to_bf16(qkv16_, qkv, B * T * 3 * C);
    if (dout == nullptr) return;
    dout16_ = scratch.staged_dout;
    if (dout16_ == nullptr) {
      own_dout16_.resize(static_cast<std::size_t>(B * T * C));
      dout16_ = own_dout16_.data();
    }
    to_bf16(dout16_, dout, B * T * C);
  }

  bool bf16() const { return bf16_; }
  int threads() const { return threads_; }
  const BFloat16* qkv16() const { return qkv16_; }
  const BFloat16* dout16() const { return dout16_; }
  ThreadBlocks blocks(int thread) const {
    std::byte* at = base_ + thread * thread_bytes(T_, bf16_);
    ThreadBlocks blocks{};
    for (float*& block : blocks.fp32) {
      block = reinterpret_cast<float*>(at);
      at += block_bytes(T_, sizeof(float));
    }
    if (bf16_)
      for (BFloat16*& block : blocks.bf16) {
        block = reinterpret_cast<BFloat16*>(at);
        at += block_bytes(T_, sizeof(BFloat16));
      }
    return blocks;
  }

 private:
  bool bf16_;
  std::int64_t T_;
  std::byte* base_ = nullptr;
  int threads_ = 1;
  BFloat16* qkv16_ = nullptr;
  BFloat16* dout16_ = nullptr;
  std::vector<std::byte> own_blocks_;
  std::vector<BFloat16> own_qkv16_, own_dout16_;
};

// One head's view of qkv (B, T, 3C) and of its bf16 copy (null for fp32 products).
struct Head {
  std::int64_t row_stride;  // 3C
  const float* q;           // (T, HS) rows of row_stride
  const float* k;
  const float* v;
  const BFloat16* q16;
  const BFloat16* k16;
  const BFloat16* v16;
};

Head head_of(const float* qkv, const BFloat16* qkv16, std::int64_t b, std::int64_t h,
             std::int64_t T, std::int64_t C, std::int64_t HS) {
  const std::int64_t offset = b * T * 3 * C + h * HS;
  const float* base = qkv + offset;
  const BFloat16* base16 = qkv16 == nullptr ? nullptr : qkv16 + offset;
  return {3 * C,
          base,
          base + C,
          base + 2 * C,
          base16,
          base16 == nullptr ? nullptr : base16 + C,
          base16 == nullptr ? nullptr : base16 + 2 * C};
}

// The dropout factor (0 or 1 / (1 - p)) of probability (b, t, h, t2), 1 without dropout.
inline float dropout_factor(const DropoutSite& dropout, std::uint64_t row_key, std::int64_t h,
                            std::int64_t T, std::int64_t t2) {
  if (!dropout.active()) return 1.0f;
  return dropout.keep(row_key, h * T + t2) ? dropout.scale() : 0.0f;
}

// s (rows, keys) = q · kᵀ for query rows t0 .. t0 + rows: in fp32 with the softmax's scale
// applied (returns true), or on bf16 q and k with fp32 sums, left for the caller to scale (false).
bool scores(const Head& head, std::int64_t t0, std::int64_t rows, std::int64_t keys,
            std::int64_t HS, float scale, float* s, std::int64_t ls) {
  const std::int64_t ld = head.row_stride;
  if (head.q16 == nullptr) {
    gemm(false, true, rows, keys, HS, scale, head.q + t0 * ld, ld, head.k, ld, 0.0f, s, ls);
    return true;
  }
  gemm_bf16(false, true, rows, keys, HS, head.q16 + t0 * ld, ld, head.k16, ld, 0.0f, s, ls);
  return false;
}

}  // namespace

std::int64_t flash_attention_blocks_bytes(std::int64_t T, bool bf16, std::int64_t threads) {
  ZERO_CHECK(T >= 1 && threads >= 1, "flash_attention_blocks_bytes: T ", T, ", ", threads,
             " threads");
  return threads * thread_bytes(T, bf16) + kAlignBytes;
}

void flash_attention_forward(float* out, float* lse, const float* qkv, std::int64_t B,
                             std::int64_t T, std::int64_t C, std::int64_t NH,
                             const DropoutSite& dropout, const FlashAttentionScratch& scratch) {
  const std::int64_t HS = C / NH, blocks = (T + kBlockRows - 1) / kBlockRows;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  const Workspace work(scratch, qkv, nullptr, B, T, C);
#pragma omp parallel num_threads(work.threads())
  {
    const ThreadBlocks own = work.blocks(omp_get_thread_num());
#pragma omp for collapse(3) schedule(dynamic, 1)
    for (std::int64_t b = 0; b < B; ++b) {
      for (std::int64_t h = 0; h < NH; ++h) {
        for (std::int64_t block = 0; block < blocks; ++block) {
          const Head head = head_of(qkv, work.qkv16(), b, h, T, C, HS);
          const std::int64_t t0 = block * kBlockRows, rows = std::min(kBlockRows, T - t0);
          const std::int64_t keys = t0 + rows, ld = head.row_stride, ls = padded(keys);
          float* s = own.fp32[0];
          // s (rows, keys) = q · kᵀ · scale, then each row's causal softmax in place.
          const bool scaled = scores(head, t0, rows, keys, HS, scale, s, ls);
          // Unscaled scores: scaling is monotonic, so the scaled maximum is the maximum scaled.
          const float row_scale = scaled ? 1.0f : scale;
          for (std::int64_t r = 0; r < rows; ++r) {
            float* row = s + r * ls;
            const std::int64_t t = t0 + r, seen = t + 1;
            float max = -INFINITY;
            for (std::int64_t j = 0; j < seen; ++j) max = std::max(max, row[j]);
            max *= row_scale;
            float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
            for (std::int64_t j = 0; j < seen; ++j) {
              row[j] = fast_exp(row[j] * row_scale - max);
              sum += row[j];
            }
            lse[(b * NH + h) * T + t] = max + std::log(sum);
            const float inverse = 1.0f / sum;
            const std::uint64_t key = dropout.active() ? dropout.row_key(b, t) : 0;
            if (work.bf16()) {  // the probabilities as P·V reads them, rounded once
              BFloat16* p16 = own.bf16[0] + r * ls;
              for (std::int64_t j = 0; j < seen; ++j)
                p16[j] = zero::to_bf16(row[j] * (inverse * dropout_factor(dropout, key, h, T, j)));
              std::fill(p16 + seen, p16 + keys, BFloat16{0});
              continue;
            }
            for (std::int64_t j = 0; j < seen; ++j)
              row[j] *= inverse * dropout_factor(dropout, key, h, T, j);
            std::fill(row + seen, row + keys, 0.0f);
          }
          // out (rows, HS) = dropout(p) · v.
          float* y = out + (b * T + t0) * C + h * HS;
          if (work.bf16())
            gemm_bf16(false, false, rows, HS, keys, own.bf16[0], ls, head.v16, ld, 0.0f, y, C);
          else
            gemm(false, false, rows, HS, keys, 1.0f, s, ls, head.v, ld, 0.0f, y, C);
        }
      }
    }
  }
}

void flash_attention_backward(float* dqkv, const float* dout, const float* qkv, const float* lse,
                              std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH,
                              const DropoutSite& dropout, const FlashAttentionScratch& scratch) {
  const std::int64_t HS = C / NH, blocks = (T + kBlockRows - 1) / kBlockRows;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  const Workspace work(scratch, qkv, dout, B, T, C);
#pragma omp parallel num_threads(work.threads())
  {
    const ThreadBlocks own = work.blocks(omp_get_thread_num());
#pragma omp for collapse(2) schedule(dynamic, 1)
    for (std::int64_t b = 0; b < B; ++b) {
      for (std::int64_t h = 0; h < NH; ++h) {
        const Head head = head_of(qkv, work.qkv16(), b, h, T, C, HS);
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
          const std::int64_t keys = t0 + rows, ls = padded(keys);
          const std::int64_t dy_offset = (b * T + t0) * C + h * HS;
          const float* dy = dout + dy_offset;
          const BFloat16* dy16 = work.bf16() ? work.dout16() + dy_offset : nullptr;
          float* p = own.fp32[0];
          float* ds = own.fp32[1];
          // p = the forward's probabilities (from its log-sum-exp), ds = dout · vᵀ (the gradient
          // of the dropped-out probabilities).
          const bool scaled = scores(head, t0, rows, keys, HS, scale, p, ls);
          const float row_scale = scaled ? 1.0f : scale;
          if (work.bf16())
            gemm_bf16(false, true, rows, keys, HS, dy16, C, head.v16, ld, 0.0f, ds, ls);
          else
            gemm(false, true, rows, keys, HS, 1.0f, dy, C, head.v, ld, 0.0f, ds, ls);
          for (std::int64_t r = 0; r < rows; ++r) {
            const std::int64_t t = t0 + r, seen = t + 1;
            float* p_row = p + r * ls;
            float* ds_row = ds + r * ls;
            const float row_lse = lse[(b * NH + h) * T + t];
            float* factor = dropout.active() ? own.fp32[2] + r * ls : nullptr;
            if (factor != nullptr) {
              const std::uint64_t key = dropout.row_key(b, t);
              for (std::int64_t j = 0; j < seen; ++j)
                factor[j] = dropout_factor(dropout, key, h, T, j);
            }
            // dp = ds · mask (the probabilities' gradient); D = Σ p · dp.
            float row_sum = 0.0f;
#pragma omp simd reduction(+ : row_sum)
            for (std::int64_t j = 0; j < seen; ++j) {
              p_row[j] = fast_exp(p_row[j] * row_scale - row_lse);
              if (factor != nullptr) ds_row[j] *= factor[j];
              row_sum += p_row[j] * ds_row[j];
            }
            // ds = p · (dp - D) · scale (the scores' gradient); p becomes dropout(p) for dv.
            if (work.bf16()) {  // both as the products read them, rounded once
              BFloat16* p16 = own.bf16[0] + r * ls;
              BFloat16* ds16 = own.bf16[1] + r * ls;
#pragma omp simd
              for (std::int64_t j = 0; j < seen; ++j) {
                ds16[j] = zero::to_bf16(p_row[j] * (ds_row[j] - row_sum) * scale);
                p16[j] = zero::to_bf16(factor != nullptr ? p_row[j] * factor[j] : p_row[j]);
              }
              std::fill(p16 + seen, p16 + keys, BFloat16{0});
              std::fill(ds16 + seen, ds16 + keys, BFloat16{0});
              continue;
            }
#pragma omp simd
            for (std::int64_t j = 0; j < seen; ++j) {
              ds_row[j] = p_row[j] * (ds_row[j] - row_sum) * scale;
              if (factor != nullptr) p_row[j] *= factor[j];
            }
            std::fill(p_row + seen, p_row + keys, 0.0f);
            std::fill(ds_row + seen, ds_row + keys, 0.0f);
          }
          // dv += dropout(p)ᵀ · dout, dq = ds · k, dk += dsᵀ · q.
          if (work.bf16()) {
            const BFloat16 *p16 = own.bf16[0], *ds16 = own.bf16[1];
            gemm_bf16(true, false, keys, HS, rows, p16, ls, dy16, C, 1.0f, dv, ld);
            gemm_bf16(false, false, rows, HS, keys, ds16, ls, head.k16, ld, 0.0f, dq + t0 * ld, ld);
            gemm_bf16(true, false, keys, HS, rows, ds16, ls, head.q16 + t0 * ld, ld, 1.0f, dk, ld);
          } else {
            gemm(true, false, keys, HS, rows, 1.0f, p, ls, dy, C, 1.0f, dv, ld);
            gemm(false, false, rows, HS, keys, 1.0f, ds, ls, head.k, ld, 0.0f, dq + t0 * ld, ld);
            gemm(true, false, keys, HS, rows, 1.0f, ds, ls, head.q + t0 * ld, ld, 1.0f, dk, ld);
          }
        }
      }
    }
  }
}

}  // namespace zero::gpt2::cpu
