// The tiny GPT-2 configs and token sequences the model, checkpoint and classifier tests run on.
#pragma once

#include <cstddef>
#include <vector>

#include "zero/gpt2/config.h"
#include "zero/gpt2/family.h"

namespace zero::gpt2 {

// The sizes of a tiny GPT-2. A test whose assertions depend on sizes states them.
struct TinySizes {
  int vocab_size = 53;  // V
  int n_positions = 12;
  int n_embd = 24;  // C
  int n_layer = 2;  // L
  int n_head = 3;   // NH
};

// GPT-2 at `sizes`, everything else GPT2Config's defaults (dropout 0.1 included).
inline GPT2Config tiny_config(const TinySizes& sizes = {}) {
  GPT2Config config;
  config.vocab_size = sizes.vocab_size;
  config.n_positions = sizes.n_positions;
  config.n_embd = sizes.n_embd;
  config.n_layer = sizes.n_layer;
  config.n_head = sizes.n_head;
  return config;
}

// A tiny Qwen2 (the Llama family with q/k/v biases) at `sizes`: 4 query heads sharing 2 key/value
// heads (grouped-query attention), an untied head, RoPE, SwiGLU of width 40; transformers'
// defaults otherwise (no dropout).
inline GPT2Config tiny_llama_config(const TinySizes& sizes = {.n_head = 4}) {
  GPT2Config config = family_defaults(ModelFamily::kQwen2);
  config.vocab_size = sizes.vocab_size;
  config.n_positions = sizes.n_positions;
  config.n_embd = sizes.n_embd;
  config.n_layer = sizes.n_layer;
  config.n_head = sizes.n_head;
  config.n_kv_head = sizes.n_head / 2;
  config.n_inner = 40;
  config.tie_word_embeddings = false;
  return config;
}

// `count` tokens below `vocab`, a different deterministic pattern per seed.
inline std::vector<int> sequence(std::size_t count, int vocab, int seed) {
  std::vector<int> tokens(count);
  for (std::size_t i = 0; i < count; ++i)
    tokens[i] = static_cast<int>((i * 7 + seed * 13 + i * i) % vocab);
  return tokens;
}

}  // namespace zero::gpt2
