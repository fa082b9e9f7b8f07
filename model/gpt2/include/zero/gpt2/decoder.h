// Decoder: incremental decoding with a KV cache, for every family (GPT-2, Llama, Mistral, Qwen2),
// on any DeviceContext (the CPU's, CUDA's) through the model's kernel seam (kernels.h).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "zero/core/allocator.h"
#include "zero/core/device_context.h"
#include "zero/core/dtype.h"
#include "zero/core/flat_buffer.h"
#include "zero/gpt2/compute.h"
#include "zero/gpt2/kernels.h"
#include "zero/gpt2/model.h"

namespace zero::gpt2 {

// One sequence's keys and values per layer, as Hugging Face's cache keeps them: the cache is
// (L, 2, KVH, max_positions, HS) fp32 in the context's device memory (kActivations), keys after
// RoPE where the family rotates them. append(tokens) runs the new tokens at positions
// positions() .. positions() + n - 1 through every block — embeddings (wpe at those positions, or
// RoPE at them), norm, q/k/v, the keys and values written into the cache, the attention of the new
// rows over the cache (Kernels::cached_attention_forward: grouped-query attention in place), the
// rest of the block — and the head on the last row only; the prompt is one append (prefill, in
// chunks of at most kChunkRows rows), each generated token another. Parameters as NextTokenLogits
// reads them: the model's own fp32 host buffers where the context's device space is host memory,
// else (or for bf16/fp16) one copy of each unit made once. Each append copies the last logits row
// back and waits for it: the one host wait per call. The model and context must outlive it.
class Decoder {
 public:
  static constexpr std::int64_t kChunkRows = 128;

  // max_positions: the cache's length, in [1, n_positions] (learned positions end there; the
  // RoPE families keep transformers' max_position_embeddings as the bound too).
  Decoder(const GPT2Model& model, DeviceContext& context, std::int64_t max_positions,
          DType param_dtype = DType::kFloat32);
  ~Decoder();
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  // The vocab_size logits (fp32) of the token after `tokens` (non-empty, ids in [0, V)), which
  // follow the positions already cached. Throws zero::Error past max_positions or for an id out
  // of range, leaving the cache as it was.
  std::vector<float> append(std::span<const int> tokens);
  // Empties the cache (the next append starts at position 0).
  void reset() { positions_ = 0; }
  std::int64_t positions() const { return positions_; }
  std::int64_t max_positions() const { return max_positions_; }
  const GPT2Config& config() const { return model_.config(); }

 private:
  ConstUnitData unit_params(int unit) const;
  void upload_params(DType param_dtype);
  void allocate(DType param_dtype);
  // One chunk of an append, at positions() on, through the model; the head when `last`.
  void forward_rows(std::span<const int> tokens, bool last);
  void forward_block(int layer, std::int64_t rows);
  void forward_head(std::int64_t rows);
  float* cache_half(int layer, int half) const;  // keys (0) or values (1) of a layer

  const GPT2Model& model_;
  DeviceContext& context_;
  std::unique_ptr<Kernels> kernels_;
  std::int64_t max_positions_;
  std::int64_t positions_ = 0;
  DType param_dtype_;
  std::vector<FlatBuffer> device_params_;  // empty where the kernels read the model's buffers
  std::shared_ptr<const BlockLayout> block_layout_;
  Buffer cache_, activations_, staging_, last_row_;
  // Views of activations_ (fp32, kChunkRows rows each) and staging_ (16-bit GEMM operands).
  float *x_, *ln_, *mean_, *rstd_, *qkv_, *kv_rows_, *atty_, *proj_, *residual_, *fch_, *act_;
  float *wpe_rows_, *ln_f_, *rope_, *param32_;
  void* logits_;
  GemmScratch scratch_;
  // Host row indices of the current chunk (valid until the stream has run it): its tokens, the k
  // and v heads of its qkv rows as HS-wide rows, and their rows in a layer's cache.
  std::vector<int> token_rows_;
  std::vector<std::int64_t> gather_rows_, scatter_rows_;
};

}  // namespace zero::gpt2
