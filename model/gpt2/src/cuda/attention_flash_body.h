// The bodies of the tiled (FlashAttention-2 style) causal attention kernels in attention_flash.cu,
// templated on the thread (zero/core/kernel_thread.h) so the CPU emulation test runs them over
// their launch grids. fp32 throughout, no tensor cores; nothing of size T×T is written.
//   forward   a block per (64-query tile, b·NH + h): the query tile stays in shared memory, key and
//             value tiles stream through it with an online softmax (running max and sum per row);
//             key tiles past the diagonal are skipped. Writes out and the row's log-sum-exp.
//   delta     a warp per (b, t, h) row: D = dout · out from the forward's saved out (the
//             backward's softmax term, Σ_t2 P·datt = dout · out, dropout included).
//   dk, dv    a block per 64-key tile, looping over the query tiles at or past the diagonal.
//   dq        a block per 64-query tile, looping over the key tiles up to the diagonal.
// Every output element is written by one thread from sums in a fixed order: deterministic, no
// atomics. A block is 16 × 16 threads: thread (ty, tx) owns tile rows ty + 16i and columns
// tx + 16j (i, j < 4) of a 64 × 64 score tile, and columns tx + 16j (j < HP / 16) of the head.
// HP, the head size padded with zeros to 16, 32, 64 or 128, is a template parameter. Operands are
// read from shared memory four at a time (128-bit loads) where a thread walks along a row; rows
// are padded by 4 floats so those loads are free of bank conflicts. C++17.
#pragma once

#include <cstdint>

#include "attention_body.h"

namespace zero::gpt2::cuda {

constexpr int kFlashTile = 64;  // queries and keys per tile
constexpr int kFlashLanes = 16;
constexpr int kFlashThreads = kFlashLanes * kFlashLanes;
constexpr int kFlashPer = kFlashTile / kFlashLanes;  // tile rows (and columns) per thread
constexpr std::int64_t kFlashMaxHead = 128;

// The padded head size of the kernels for head size HS, 0 past kFlashMaxHead (the plain kernels).
constexpr int flash_head_bucket(std::int64_t HS) {
  return HS < 1 ? 0 : HS <= 16 ? 16 : HS <= 32 ? 32 : HS <= 64 ? 64 : HS <= 128 ? 128 : 0;
}

// Shared memory of the three tiled kernels in floats: tiles of 64 rows × HP (+4), score tiles of 64
// × 64
// (+4), per-row statistics of 64. Rows 4 floats longer than they hold: 128-bit loads stay aligned,
// and the eight rows a quarter-warp's 128-bit loads touch fall in distinct banks.
template <int HP>
struct FlashShared {
  static constexpr int kStride = HP + 4, kTile = kFlashTile * kStride;
  static constexpr int kScoreStride = kFlashTile + 4, kScores = kFlashTile * kScoreStride;
  static constexpr int kForward = 3 * kTile + kScores;                    // Q, K, V, P
  static constexpr int kKeys = 4 * kTile + 2 * kScores + 2 * kFlashTile;  // K V Q dO, P dS, lse D
  static constexpr int kQueries = 4 * kTile + kScores + 2 * kFlashTile;   // Q dO K V, dS, lse D
};

constexpr std::int64_t flash_tiles(std::int64_t T) { return (T + kFlashTile - 1) / kFlashTile; }

// A block per (tile, b·NH + h), with `floats` of dynamic shared memory.
constexpr LaunchConfig flash_launch(std::int64_t B, std::int64_t T, std::int64_t NH, int floats) {
  LaunchConfig config;
  config.grid = {static_cast<unsigned>(flash_tiles(T)), static_cast<unsigned>(B * NH), 1};
  config.block = {kFlashThreads, 1, 1};
  config.dynamic_shared_bytes = static_cast<std::size_t>(floats) * sizeof(float);
  return config;
}

// Rows first..first+63 of a (T, HS) matrix at `source` (rows `stride` floats apart) into a shared
// tile of 64 × HP (row stride HP + 4), zeros past T and past HS. Shared memory is a view
// (thread.shared, kernel_thread.h's SharedView) here and below.
template <int HP, typename Thread, typename SharedFloats>
ZERO_HOST_DEVICE_INLINE void flash_load_tile(const Thread& thread, const SharedFloats& tile,
                                             const float* source, std::int64_t stride,
                                             std::int64_t first, std::int64_t T, std::int64_t HS) {
  for (int e = static_cast<int>(kernels::linear_thread(thread)); e < kFlashTile * HP;
       e += kFlashThreads) {
    const int r = e / HP, d = e % HP;
    const std::int64_t t = first + r;
    tile[r * FlashShared<HP>::kStride + d] = t < T && d < HS ? source[t * stride + d] : 0.0f;
  }
}

// values[first..first+63] into shared `row` (zeros past T).
template <typename Thread, typename SharedFloats>
ZERO_HOST_DEVICE_INLINE void flash_load_rows(const Thread& thread, const SharedFloats& row,
                                             const float* values, std::int64_t first,
                                             std::int64_t T) {
  const int e = static_cast<int>(kernels::linear_thread(thread));
  if (e < kFlashTile) row[e] = first + e < T ? values[first + e] : 0.0f;
}

// Sum and max over the 16 threads of a tile row (lanes tx of one half-warp).
template <typename Thread>
ZERO_HOST_DEVICE_INLINE float flash_row_sum(const Thread& thread, float value) {
  for (int offset = kFlashLanes / 2; offset > 0; offset /= 2)
    value += thread.shfl_xor(value, offset);
  return value;
}
template <typename Thread>
ZERO_HOST_DEVICE_INLINE float flash_row_max(const Thread& thread, float value) {
  for (int offset = kFlashLanes / 2; offset > 0; offset /= 2)
    value = fmaxf(value, thread.shfl_xor(value, offset));
  return value;
}

// v = tile[i..i+3], one 128-bit shared-memory load on the device (16-byte aligned: tile strides and
// offsets are multiples of 4 floats; emulation checks it).
template <typename SharedFloats>
ZERO_HOST_DEVICE_INLINE void flash_load4(const SharedFloats& tile, int i, float (&v)[4]) {
#if defined(__CUDA_ARCH__)
  const float4 x = *reinterpret_cast<const float4*>(tile.address(i));
  v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
#else
  kernels::require_aligned(tile.address(i), 16, "a tiled attention shared load");
  v[0] = tile[i], v[1] = tile[i + 1], v[2] = tile[i + 2], v[3] = tile[i + 3];
#endif
}

// acc[i][j] += Σ_d a[(ty + 16i)·s + d] · b[(tx + 16j)·s + d] over d < HP in order (s = HP + 4):
// a 64 × 64 tile of A·Bᵀ, four d per 128-bit load of each operand.
template <int HP, typename SharedFloats>
ZERO_HOST_DEVICE_INLINE void flash_scores(float (&acc)[kFlashPer][kFlashPer], const SharedFloats& a,
                                          const SharedFloats& b, int ty, int tx) {
  constexpr int s = FlashShared<HP>::kStride;
  for (int d = 0; d < HP; d += 4) {
    float av[kFlashPer][4], bv[kFlashPer][4];
    ZERO_UNROLL
    for (int i = 0; i < kFlashPer; ++i) flash_load4(a, (ty + kFlashLanes * i) * s + d, av[i]);
    ZERO_UNROLL
    for (int j = 0; j < kFlashPer; ++j) flash_load4(b, (tx + kFlashLanes * j) * s + d, bv[j]);
    ZERO_UNROLL
    for (int e = 0; e < 4; ++e) {
      ZERO_UNROLL
      for (int i = 0; i < kFlashPer; ++i) {
        ZERO_UNROLL
        for (int j = 0; j < kFlashPer; ++j) acc[i][j] += av[i][e] * bv[j][e];
      }
    }
  }
}

// acc[i][j] += Σ_k w[(ty + 16i)·68 + k] · m[k·(HP + 4) + tx + 16j] over the 64 tile rows k in
// order: a score tile times a (64, HP) tile, for the thread's rows and head columns.
template <int HP, typename SharedFloats>
ZERO_HOST_DEVICE_INLINE void flash_apply(float (&acc)[kFlashPer][HP / kFlashLanes],
                                         const SharedFloats& w, const SharedFloats& m, int ty,
                                         int tx) {
  constexpr int s = FlashShared<HP>::kStride, ws = FlashShared<HP>::kScoreStride;
  constexpr int cols = HP / kFlashLanes;
  for (int k = 0; k < kFlashTile; k += 4) {
    float wv[kFlashPer][4];
    ZERO_UNROLL
    for (int i = 0; i < kFlashPer; ++i) flash_load4(w, (ty + kFlashLanes * i) * ws + k, wv[i]);
    ZERO_UNROLL
    for (int e = 0; e < 4; ++e) {
      float mv[cols];
      ZERO_UNROLL
      for (int j = 0; j < cols; ++j) mv[j] = m[(k + e) * s + tx + kFlashLanes * j];
      ZERO_UNROLL
      for (int i = 0; i < kFlashPer; ++i) {
        ZERO_UNROLL
        for (int j = 0; j < cols; ++j) acc[i][j] += wv[i][e] * mv[j];
      }
    }
  }
}

// What a thread of a tiled kernel knows of its block: the head (b, h) of blockIdx.y, its lanes
// (ty, tx), the score scale and the head's query columns in qkv (keys at + C, values at + 2C).
struct FlashThread {
  std::int64_t HS, C3, bh, b, h;
  int tx, ty;
  float scale;
  const float* head;
};
template <typename Thread>
ZERO_HOST_DEVICE_INLINE FlashThread flash_thread(const Thread& thread, const float* qkv,
                                                 std::int64_t T, std::int64_t C, std::int64_t NH) {
  FlashThread f;
  f.HS = C / NH, f.C3 = 3 * C, f.bh = thread.block_index().y;
  f.b = f.bh / NH, f.h = f.bh % NH;
  const int tid = static_cast<int>(kernels::linear_thread(thread));
  f.tx = tid % kFlashLanes, f.ty = tid / kFlashLanes;
  f.scale = 1.0f / sqrtf(static_cast<float>(f.HS));
  f.head = qkv + f.b * T * f.C3 + f.h * f.HS;
  return f;
}

// The thread's part of a (64, HP) output tile: acc[i][j] to target[t · stride + d] for tile row
// t = first + ty + 16i < T and head column d = tx + 16j < HS.
template <int HP>
ZERO_HOST_DEVICE_INLINE void flash_store(float* target, std::int64_t stride,
                                         const float (&acc)[kFlashPer][HP / kFlashLanes],
                                         std::int64_t first, std::int64_t T, std::int64_t HS,
                                         int ty, int tx) {
  ZERO_UNROLL
  for (int i = 0; i < kFlashPer; ++i) {
    const std::int64_t t = first + ty + kFlashLanes * i;
    ZERO_UNROLL
    for (int j = 0; j < HP / kFlashLanes; ++j) {
      const std::int64_t d = tx + kFlashLanes * j;
      if (t < T && d < HS) target[t * stride + d] = acc[i][j];
    }
  }
}

// The dropout factor of weight (t, t2) given t's row key (attention_mask's value).
ZERO_HOST_DEVICE_INLINE float flash_mask(const DropoutSite& dropout, std::uint64_t row_key,
                                         std::int64_t h, std::int64_t t2, std::int64_t T) {
  if (!dropout.active()) return 1.0f;
  return dropout.keep(row_key, static_cast<std::uint64_t>(h * T + t2)) ? dropout.scale() : 0.0f;
}

// out (B, T, C) and lse[(b·NH + h)·T + t] = log Σ exp(scores of row t). Query tiles run last to
// first (the longest first).
template <int HP, typename Thread>
ZERO_HOST_DEVICE void flash_forward_body(const Thread& thread, float* shared, float* out,
                                         float* lse, const float* qkv, std::int64_t B,
                                         std::int64_t T, std::int64_t C, std::int64_t NH,
                                         const DropoutSite& dropout) {
  using Layout = FlashShared<HP>;
  constexpr int cols = HP / kFlashLanes;
  const auto [HS, C3, bh, b, h, tx, ty, scale, head] = flash_thread(thread, qkv, T, C, NH);
  const std::int64_t qt = flash_tiles(T) - 1 - thread.block_index().x, q0 = qt * kFlashTile;
  if (b >= B) return;
  const auto q_tile = thread.shared(shared);
  const auto k_tile = q_tile + Layout::kTile;
  const auto v_tile = k_tile + Layout::kTile;
  const auto p_tile = v_tile + Layout::kTile;
  flash_load_tile<HP>(thread, q_tile, head, C3, q0, T, HS);
  float o[kFlashPer][cols] = {}, m[kFlashPer], l[kFlashPer];
  std::uint64_t row_keys[kFlashPer];
  ZERO_UNROLL
  for (int i = 0; i < kFlashPer; ++i) {
    m[i] = -INFINITY, l[i] = 0.0f;
    row_keys[i] = dropout.active() ? dropout.row_key(b, q0 + ty + kFlashLanes * i) : 0;
  }
  for (std::int64_t k0 = 0; k0 <= q0; k0 += kFlashTile) {
    thread.sync_block();  // the previous tile's readers are done
    flash_load_tile<HP>(thread, k_tile, head + C, C3, k0, T, HS);
    flash_load_tile<HP>(thread, v_tile, head + 2 * C, C3, k0, T, HS);
    thread.sync_block();
    float s[kFlashPer][kFlashPer] = {};
    flash_scores<HP>(s, q_tile, k_tile, ty, tx);
    ZERO_UNROLL
    for (int i = 0; i < kFlashPer; ++i) {
      const std::int64_t t = q0 + ty + kFlashLanes * i;
      float tile_max = -INFINITY;
      ZERO_UNROLL
      for (int j = 0; j < kFlashPer; ++j) {
        s[i][j] = k0 + tx + kFlashLanes * j <= t ? s[i][j] * scale : -INFINITY;
        tile_max = fmaxf(tile_max, s[i][j]);
      }
      const float m_new = fmaxf(m[i], flash_row_max(thread, tile_max));  // finite: key k0 <= t
      const float correction = expf(m[i] - m_new);
      m[i] = m_new;
      l[i] *= correction;
      ZERO_UNROLL
      for (int j = 0; j < cols; ++j) o[i][j] *= correction;
      ZERO_UNROLL
      for (int j = 0; j < kFlashPer; ++j) {
        const std::int64_t t2 = k0 + tx + kFlashLanes * j;
        const float p = expf(s[i][j] - m_new);  // 0 past t
        l[i] += p;
        p_tile[(ty + kFlashLanes * i) * Layout::kScoreStride + tx + kFlashLanes * j] =
            p * (t2 <= t ? flash_mask(dropout, row_keys[i], h, t2, T) : 0.0f);
      }
    }
    thread.sync_block();
    flash_apply<HP>(o, p_tile, v_tile, ty, tx);
  }
  ZERO_UNROLL
  for (int i = 0; i < kFlashPer; ++i) {
    const std::int64_t t = q0 + ty + kFlashLanes * i;
    const float sum = flash_row_sum(thread, l[i]), inverse = 1.0f / sum;
    ZERO_UNROLL
    for (int j = 0; j < cols; ++j) o[i][j] *= inverse;
    if (t < T && tx == 0) lse[bh * T + t] = m[i] + logf(sum);
  }
  flash_store<HP>(out + b * T * C + h * HS, C, o, q0, T, HS, ty, tx);
}

// The launch of flash_delta_body: a warp per (b, t, h) row (layers_body.h's row_warp_launch).
constexpr LaunchConfig flash_delta_launch(std::int64_t B, std::int64_t T, std::int64_t NH) {
  return row_warp_launch(B * T * NH);
}

// delta[(b·NH + h)·T + t] = D = Σ_d dout · out over the head's HS channels of row (b, t), with out
// the forward's output (dropout applied): the backward's softmax term Σ_t2 P·datt. Warp w takes
// row (b, t, h) = w in that order, so neighbouring warps read neighbouring heads of one (b, t);
// each lane sums its channels in order and the warp's butterfly adds the lanes (deterministic).
template <typename Thread>
ZERO_HOST_DEVICE void flash_delta_body(const Thread& thread, float* delta, const float* dout,
                                       const float* out, std::int64_t B, std::int64_t T,
                                       std::int64_t C, std::int64_t NH) {
  const std::int64_t row = warp_row(thread);
  if (row >= B * T * NH) return;
  const int lane = kernels::lane_of(thread);
  const std::int64_t h = row % NH, bt = row / NH, b = bt / T, t = bt % T, HS = C / NH;
  const float* y = out + bt * C + h * HS;
  const float* dy = dout + bt * C + h * HS;
  float dot = 0.0f;
  for (std::int64_t d = lane; d < HS; d += kWarpSize) dot += dy[d] * y[d];
  dot = kernels::warp_sum(thread, dot);
  if (lane == 0) delta[(b * NH + h) * T + t] = dot;
}

// The softmax weight P and dpre = P · (datt · mask - D) · scale of score s (already scaled) of
// query t and key t2 (0 both past the diagonal or past T).
struct FlashGrad {
  float p_masked, dpre;
};
ZERO_HOST_DEVICE_INLINE FlashGrad flash_grad(float s, float dp, float lse, float delta, bool valid,
                                             float mask, float scale) {
  if (!valid) return {0.0f, 0.0f};
  const float p = expf(s - lse);
  return {p * mask, p * (dp * mask - delta) * scale};
}

}  // namespace zero::gpt2::cuda
