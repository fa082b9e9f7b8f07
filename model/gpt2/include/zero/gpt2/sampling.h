// Greedy and top-k sampling from GPT-2 logits, and prompt continuation with GPT2Model on any
// DeviceContext (the CPU's, CUDA's).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "zero/core/device_context.h"
#include "zero/core/dtype.h"
#include "zero/gpt2/compute.h"
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
// context's device: GPT2Compute (batch 1, `window` positions) on the context's compute stream,
// activations from its device allocator. Where the context's kernels can read the model's own
// host memory (its device space is host-addressable) and `param_dtype` is fp32, they read the
// model's buffers; otherwise each unit is copied to the device once, rounded to `param_dtype`
// (fp32, bf16 or fp16) on the host, through pinned memory. Each call copies the last row's logits
// back and waits for them: the one host wait per token. The model and context must outlive it.
class NextTokenLogits {
 public:
  NextTokenLogits(const GPT2Model& model, DeviceContext& context, std::int64_t window,
                  DType param_dtype = DType::kFloat32);
  ~NextTokenLogits();
  NextTokenLogits(const NextTokenLogits&) = delete;
  NextTokenLogits& operator=(const NextTokenLogits&) = delete;

  // vocab_size logits of the token after `tokens` (non-empty; its last `window` tokens are read),
  // in fp32 (widened where the device computes them in 16 bits).
  std::vector<float> operator()(std::span<const int> tokens);
  std::int64_t window() const { return window_; }

 private:
  ConstUnitData unit_params(int unit) const;
  void upload_params(DType param_dtype);

  const GPT2Model& model_;
  DeviceContext& context_;
  std::int64_t window_;
  std::vector<FlatBuffer> device_params_;  // empty where the kernels read the model's buffers
  std::unique_ptr<GPT2Compute> compute_;
  Buffer last_row_;  // pinned host memory: the last position's logits as computed
};

// Appends up to `max_new_tokens` tokens to `prompt` (non-empty), stopping after the first new
// token that is one of `stop_tokens` (kept, as Hugging Face's generate keeps its eos). Runs the
// full forward for each new token over a window of the last n_positions tokens (no KV cache: this
// is for demos and eyeballing, not serving), on `context`'s device with the parameters in
// `param_dtype` (NextTokenLogits).
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
