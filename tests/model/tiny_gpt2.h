// The tiny GPT-2 and token sequences the model tests (fp32 and 16-bit) run on.
#pragma once

#include <cstddef>
#include <vector>

#include "zero/gpt2/config.h"

namespace zero::gpt2 {

inline GPT2Config tiny_config() {
  GPT2Config config;
  config.vocab_size = 53;
  config.n_positions = 12;
  config.n_embd = 24;
  config.n_layer = 2;
  config.n_head = 3;
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
