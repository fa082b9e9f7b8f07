// Greedy and top-k sampling from GPT-2 logits, and prompt continuation with GPT2Model.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "zero/gpt2/model.h"

namespace zero::gpt2 {

struct SamplingOptions {
  int top_k = 0;             // 0 or 1: greedy (argmax); k > 1: sample among the k most likely
  float temperature = 1.0f;  // logits divided by it before the softmax (top-k only)
  std::uint64_t seed = 0;    // draw i uses uniform(seed, i): reproducible
};

// Index of the largest of logits[0, V) (the first on ties).
int sample_greedy(std::span<const float> logits);
// Top-k sampling with one uniform draw `coin` in [0, 1).
int sample_top_k(std::span<const float> logits, int k, float temperature, float coin);

// Appends up to `max_new_tokens` tokens to `prompt` (non-empty), stopping early at
// `stop_token` (when >= 0). Runs the full forward for each new token over a window of the last
// n_positions tokens (no KV cache: this is for demos and eyeballing, not serving).
std::vector<int> generate(const GPT2Model& model, Allocator& allocator, std::span<const int> prompt,
                          int max_new_tokens, const SamplingOptions& options, int stop_token = -1);

}  // namespace zero::gpt2
