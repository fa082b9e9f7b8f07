// One attention over a KV cache, generation's (decoder.h): what Kernels::cached_attention_forward,
// cpu::cached_attention_forward, its scalar twin and the CUDA body read. Plain pointers and
// counts; C++17 (nvcc compiles it in the CUDA body).
#pragma once

#include <cstdint>

namespace zero::gpt2 {

// Q query rows at positions first_position + i, row i attending to the cached positions
// [0, first_position + i] (causal; no dropout): out (Q, NH·HS, overwritten) =
// softmax(q · kᵀ / √HS) · v per head. q: Q rows of q_stride floats whose first NH·HS are the
// query heads (a qkv row, rotated where the family uses RoPE). keys and values: (KVH,
// max_positions, HS) each, one layer's half of the cache, holding positions [0, first_position +
// Q). Query head h reads key/value head h / (NH / KVH) (grouped-query attention in place, without
// repeat_kv); KVH divides NH.
struct CachedAttention {
  float* out = nullptr;
  const float* q = nullptr;
  std::int64_t q_stride = 0;
  const float* keys = nullptr;
  const float* values = nullptr;
  std::int64_t Q = 0, first_position = 0, max_positions = 0;
  std::int64_t NH = 0, KVH = 0, HS = 0;
};

}  // namespace zero::gpt2
