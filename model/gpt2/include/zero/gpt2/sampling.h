// Greedy and top-k sampling from a model's logits, and prompt continuation with GPT2Model and a
// KV cache (decoder.h) on any DeviceContext (the CPU's, CUDA's).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "zero/core/device_context.h"
#include "zero/core/dtype.h"
#include "zero/gpt2/compute.h"
#include "zero/gpt2/decoder.h"
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

// The logits of the next token after a sequence, computed by a GPT2Model's parameters on a
// context's device through a Decoder (decoder.h: a KV cache of `window` positions, the parameters
// read in place or copied once in `param_dtype`, one host wait per call). A call whose window (the
// last `window` tokens) extends the previous call's runs only the new tokens; any other (a first
// call, another sequence, or a window that has slid past n_positions) empties the cache and runs
// the whole window from position 0, as a full forward over it would. The model and context must
// outlive it.
class NextTokenLogits {
 public:
  NextTokenLogits(const GPT2Model& model, DeviceContext& context, std::int64_t window,
                  DType param_dtype = DType::kFloat32);
  NextTokenLogits(const NextTokenLogits&) = delete;
  NextTokenLogits& operator=(const NextTokenLogits&) = delete;

  // vocab_size logits of the token after `tokens` (non-empty; its last `window` tokens are read),
  // in fp32 (widened where the device computes them in 16 bits).
  std::vector<float> operator()(std::span<const int> tokens);
  std::int64_t window() const { return decoder_.max_positions(); }

 private:
  Decoder decoder_;
  std::vector<int> cached_;  // the tokens whose keys and values the decoder holds
};

// Appends up to `max_new_tokens` tokens to `prompt` (non-empty), stopping after the first new
// token that is one of `stop_tokens` (kept, as Hugging Face's generate keeps its eos), on
// `context`'s device with the parameters in `param_dtype` (NextTokenLogits): the prompt runs once,
// then one position per new token with the KV cache. Past n_positions the window slides: each
// further token is the next of the last n_positions tokens, run from position 0 (a full forward
// over the window per token; transformers 4.46 raises an index error there for GPT-2's learned
// positions, and for RoPE families continues the positions past max_position_embeddings, which
// zero does not).
std::vector<int> generate(const GPT2Model& model, DeviceContext& context,
                          std::span<const int> prompt, int max_new_tokens,
                          const SamplingOptions& options, std::span<const int> stop_tokens = {},
                          DType param_dtype = DType::kFloat32);
// The same with the logits of `next_logits` (parameters on the device already: one upload for
// several continuations); its window is the model's context, as above.
std::vector<int> generate(NextTokenLogits& next_logits, std::span<const int> prompt,
                          int max_new_tokens, const SamplingOptions& options,
                          std::span<const int> stop_tokens = {});
// The ids generation stops at: config.json's eos_token_id, all of them where it is a list (Llama
// 3.1's three), none where it is null.
std::vector<int> eos_token_ids(const GPT2Config& config);
// The window generate() uses: min(n_positions, prompt + new tokens).
std::int64_t generation_window(const GPT2Config& config, std::size_t prompt_tokens,
                               int max_new_tokens);

}  // namespace zero::gpt2
