// The backward bodies of the tiled causal attention (attention_flash_body.h has the layout, the
// forward and the delta pass): dk and dv by key tile, dq by query tile, each recomputing the
// scores and P = exp(s - lse) from the forward's log-sum-exp. C++17 for nvcc.
#pragma once

#include <cstdint>

#include "attention_flash_body.h"

namespace zero::gpt2::cuda {

// dk and dv (B, T, C) parts of dqkv for the key tile blockIdx.x of head b·NH + h = blockIdx.y:
// dv(t2) = Σ_t P·mask · dout(t), dk(t2) = Σ_t dpre · q(t) over the query tiles from the
// diagonal on. lse and delta: (B, NH, T).
template <int HP, typename Thread>
ZERO_HOST_DEVICE void flash_dkv_body(const Thread& thread, float* shared, float* dqkv,
                                     const float* dout, const float* qkv, const float* lse,
                                     const float* delta, std::int64_t B, std::int64_t T,
                                     std::int64_t C, std::int64_t NH, const DropoutSite& dropout) {
  using Layout = FlashShared<HP>;
  constexpr int cols = HP / kFlashLanes;
  const auto [HS, C3, bh, b, h, tx, ty, scale, head] = flash_thread(thread, qkv, T, C, NH);
  const std::int64_t k0 = static_cast<std::int64_t>(thread.block_index().x) * kFlashTile;
  if (b >= B) return;
  const auto k_tile = thread.shared(shared);
  const auto v_tile = k_tile + Layout::kTile;
  const auto q_tile = v_tile + Layout::kTile;
  const auto dout_tile = q_tile + Layout::kTile;
  const auto p_tile = dout_tile + Layout::kTile;  // [key][query]
  const auto dpre_tile = p_tile + Layout::kScores;
  const auto lse_row = dpre_tile + Layout::kScores;
  const auto delta_row = lse_row + kFlashTile;
  const float* dhead = dout + b * T * C + h * HS;
  flash_load_tile<HP>(thread, k_tile, head + C, C3, k0, T, HS);
  flash_load_tile<HP>(thread, v_tile, head + 2 * C, C3, k0, T, HS);
  float dk[kFlashPer][cols] = {}, dv[kFlashPer][cols] = {};
  for (std::int64_t q0 = k0; q0 < T; q0 += kFlashTile) {
    thread.sync_block();  // the previous tile's readers are done
    flash_load_tile<HP>(thread, q_tile, head, C3, q0, T, HS);
    flash_load_tile<HP>(thread, dout_tile, dhead, C, q0, T, HS);
    flash_load_rows(thread, lse_row, lse + bh * T, q0, T);
    flash_load_rows(thread, delta_row, delta + bh * T, q0, T);
    thread.sync_block();
    float s[kFlashPer][kFlashPer] = {}, dp[kFlashPer][kFlashPer] = {};
    flash_scores<HP>(s, k_tile, q_tile, ty, tx);  // s[i][j]: key ty + 16i, query tx + 16j
    flash_scores<HP>(dp, v_tile, dout_tile, ty, tx);
    ZERO_UNROLL
    for (int j = 0; j < kFlashPer; ++j) {
      const int r = tx + kFlashLanes * j;
      const std::int64_t t = q0 + r;
      const std::uint64_t row_key = dropout.active() ? dropout.row_key(b, t) : 0;
      ZERO_UNROLL
      for (int i = 0; i < kFlashPer; ++i) {
        const std::int64_t t2 = k0 + ty + kFlashLanes * i;
        const bool valid = t2 <= t && t < T;
        const float mask = valid ? flash_mask(dropout, row_key, h, t2, T) : 0.0f;
        const FlashGrad g =
            flash_grad(s[i][j] * scale, dp[i][j], lse_row[r], delta_row[r], valid, mask, scale);
        const int at = (ty + kFlashLanes * i) * Layout::kScoreStride + r;
        p_tile[at] = g.p_masked;
        dpre_tile[at] = g.dpre;
      }
    }
    thread.sync_block();
    flash_apply<HP>(dv, p_tile, dout_tile, ty, tx);
    flash_apply<HP>(dk, dpre_tile, q_tile, ty, tx);
  }
  float* dhead_qkv = dqkv + b * T * C3 + h * HS;
  flash_store<HP>(dhead_qkv + C, C3, dk, k0, T, HS, ty, tx);
  flash_store<HP>(dhead_qkv + 2 * C, C3, dv, k0, T, HS, ty, tx);
}

// The dq part of dqkv for query tile (tiles - 1 - blockIdx.x) of head blockIdx.y:
// dq(t) = Σ_{t2 <= t} dpre · k(t2).
template <int HP, typename Thread>
ZERO_HOST_DEVICE void flash_dq_body(const Thread& thread, float* shared, float* dqkv,
                                    const float* dout, const float* qkv, const float* lse,
                                    const float* delta, std::int64_t B, std::int64_t T,
                                    std::int64_t C, std::int64_t NH, const DropoutSite& dropout) {
  using Layout = FlashShared<HP>;
  constexpr int cols = HP / kFlashLanes;
  const auto [HS, C3, bh, b, h, tx, ty, scale, head] = flash_thread(thread, qkv, T, C, NH);
  const std::int64_t qt = flash_tiles(T) - 1 - thread.block_index().x, q0 = qt * kFlashTile;
  if (b >= B) return;
  const auto q_tile = thread.shared(shared);
  const auto dout_tile = q_tile + Layout::kTile;
  const auto k_tile = dout_tile + Layout::kTile;
  const auto v_tile = k_tile + Layout::kTile;
  const auto dpre_tile = v_tile + Layout::kTile;  // [query][key]
  const auto lse_row = dpre_tile + Layout::kScores;
  const auto delta_row = lse_row + kFlashTile;
  flash_load_tile<HP>(thread, q_tile, head, C3, q0, T, HS);
  flash_load_tile<HP>(thread, dout_tile, dout + b * T * C + h * HS, C, q0, T, HS);
  flash_load_rows(thread, lse_row, lse + bh * T, q0, T);
  flash_load_rows(thread, delta_row, delta + bh * T, q0, T);
  float dq[kFlashPer][cols] = {};
  std::uint64_t row_keys[kFlashPer];
  ZERO_UNROLL
  for (int i = 0; i < kFlashPer; ++i)
    row_keys[i] = dropout.active() ? dropout.row_key(b, q0 + ty + kFlashLanes * i) : 0;
  for (std::int64_t k0 = 0; k0 <= q0; k0 += kFlashTile) {
    thread.sync_block();  // the previous tile's readers are done
    flash_load_tile<HP>(thread, k_tile, head + C, C3, k0, T, HS);
    flash_load_tile<HP>(thread, v_tile, head + 2 * C, C3, k0, T, HS);
    thread.sync_block();
    float s[kFlashPer][kFlashPer] = {}, dp[kFlashPer][kFlashPer] = {};
    flash_scores<HP>(s, q_tile, k_tile, ty, tx);  // s[i][j]: query ty + 16i, key tx + 16j
    flash_scores<HP>(dp, dout_tile, v_tile, ty, tx);
    ZERO_UNROLL
    for (int i = 0; i < kFlashPer; ++i) {
      const int r = ty + kFlashLanes * i;
      const std::int64_t t = q0 + r;
      ZERO_UNROLL
      for (int j = 0; j < kFlashPer; ++j) {
        const std::int64_t t2 = k0 + tx + kFlashLanes * j;
        const bool valid = t2 <= t && t < T;
        const float mask = valid ? flash_mask(dropout, row_keys[i], h, t2, T) : 0.0f;
        dpre_tile[r * Layout::kScoreStride + tx + kFlashLanes * j] =
            flash_grad(s[i][j] * scale, dp[i][j], lse_row[r], delta_row[r], valid, mask, scale)
                .dpre;
      }
    }
    thread.sync_block();
    flash_apply<HP>(dq, dpre_tile, k_tile, ty, tx);
  }
  flash_store<HP>(dqkv + b * T * C3 + h * HS, C3, dq, q0, T, HS, ty, tx);
}

}  // namespace zero::gpt2::cuda
