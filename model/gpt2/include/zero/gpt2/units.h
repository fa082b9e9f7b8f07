// GPT-2's parameter units (embeddings, each block, final layer norm), their tensor layouts,
// typed views into a unit's flat parameters, and the sharding-independent initialisation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "zero/core/flat_buffer.h"
#include "zero/core/partition.h"
#include "zero/gpt2/config.h"

namespace zero::gpt2 {

enum class UnitKind : std::uint8_t { kEmbeddings, kBlock, kFinalNorm };

// One unit the engine gathers, computes and releases as a whole. Tensors are listed in flat
// order; the engine lays them out with FlatLayout(tensors, world_size, alignment), so a tensor's
// offset never depends on the world size (padding only follows the last tensor).
//
// Weight layout (documented once): matrices keep Hugging Face's Conv1D layout [in, out]
// row-major, so y = x · W is a plain no-transpose GEMM and checkpoints load without transposes.
// wte is (Vp, C): Hugging Face's (V, C) plus zero rows up to Vp (loaded and saved unpadded).
//   embeddings: wte.weight (Vp, C), wpe.weight (maxT, C)
//   h.l:        ln_1.weight (C), ln_1.bias (C), attn.c_attn.weight (C, 3C), attn.c_attn.bias (3C),
//               attn.c_proj.weight (C, C), attn.c_proj.bias (C), ln_2.weight (C), ln_2.bias (C),
//               mlp.c_fc.weight (C, H), mlp.c_fc.bias (H), mlp.c_proj.weight (H, C),
//               mlp.c_proj.bias (C)
//   ln_f:       ln_f.weight (C), ln_f.bias (C)
// The Hugging Face name of a tensor is "transformer." + unit prefix ("h.l." for blocks) + name.
//
// The Llama family (family.h: Llama, Mistral, Qwen2) keeps nn.Linear's layout [out, in] row-major
// (y = x · Wᵀ; checkpoints load without transposes), HS = head size, KVH = key/value heads:
//   embeddings: embed_tokens.weight (Vp, C)
//   layers.l:   input_layernorm.weight (C), self_attn.q_proj.weight (NH·HS, C) [+ bias (NH·HS)],
//               self_attn.k_proj.weight (KVH·HS, C) [+ bias], self_attn.v_proj.weight (KVH·HS, C)
//               [+ bias], self_attn.o_proj.weight (C, NH·HS) [+ bias (C)],
//               post_attention_layernorm.weight (C), mlp.gate_proj.weight (H, C) [+ bias (H)],
//               mlp.up_proj.weight (H, C) [+ bias], mlp.down_proj.weight (C, H) [+ bias (C)]
//   norm:       norm.weight (C), and lm_head.weight (Vp, C) when the embeddings are untied
// q/k/v biases: Qwen2 always, Llama with attention_bias (o too); MLP biases with mlp_bias. The
// Hugging Face name is "model." + unit prefix ("layers.l." for blocks) + name; lm_head.weight is
// its own.
struct UnitSpec {
  std::string name;  // "embeddings", "h.0" / "layers.0", ..., "ln_f" / "norm"
  UnitKind kind = UnitKind::kBlock;
  int layer = -1;  // block index for kBlock, -1 otherwise
  std::vector<TensorSpec> tensors;
  ModelFamily family = ModelFamily::kGpt2;
  std::size_t num_elements() const;
};

// L + 2 units: [embeddings, h.0 .. h.(L-1), ln_f] (the Llama family: [embeddings, layers.0 ..,
// norm]). Forward runs them in this order and then the head (the final unit with the embeddings
// when tied, see compute.h); backward runs the reverse.
std::vector<UnitSpec> gpt2_units(const GPT2Config& config);
inline int embeddings_unit() { return 0; }
inline int block_unit(int layer) { return 1 + layer; }
inline int final_norm_unit(const GPT2Config& config) {
  return static_cast<int>(config.n_layer) + 1;
}
// The unit holding the LM head's weight, what GPT2Compute::forward_head takes second: the
// embeddings (tied to wte), or the final unit (an untied lm_head.weight).
inline int head_unit(const GPT2Config& config) {
  return config.tie_word_embeddings ? embeddings_unit() : final_norm_unit(config);
}

// Hugging Face name of unit tensor `tensor_name` ("transformer.h.3.attn.c_attn.weight",
// "model.layers.3.self_attn.q_proj.weight", "lm_head.weight").
std::string hf_tensor_name(const UnitSpec& unit, const std::string& tensor_name);

// Typed pointers into one unit's flat parameters (T = const float) or gradients (T = float),
// in the order above. `base` points at the unit's first element (offset 0 of its layout).
template <typename T>
struct EmbeddingTensors {
  T* wte;  // (Vp, C)
  T* wpe;  // (maxT, C)
  EmbeddingTensors(T* base, const GPT2Config& config)
      : wte(base), wpe(base + config.padded_vocab_size() * config.n_embd) {}
};

template <typename T>
struct BlockTensors {
  T* ln1_weight;      // (C)
  T* ln1_bias;        // (C)
  T* qkv_weight;      // (C, 3C)
  T* qkv_bias;        // (3C)
  T* attproj_weight;  // (C, C)
  T* attproj_bias;    // (C)
  T* ln2_weight;      // (C)
  T* ln2_bias;        // (C)
  T* fc_weight;       // (C, H)
  T* fc_bias;         // (H)
  T* fcproj_weight;   // (H, C)
  T* fcproj_bias;     // (C)
  BlockTensors(T* base, const GPT2Config& config) {
    const std::int64_t C = config.n_embd, H = config.hidden_size();
    T* p = base;
    auto take = [&p](std::int64_t count) {
      T* at = p;
      p += count;
      return at;
    };
    ln1_weight = take(C);
    ln1_bias = take(C);
    qkv_weight = take(C * 3 * C);
    qkv_bias = take(3 * C);
    attproj_weight = take(C * C);
    attproj_bias = take(C);
    ln2_weight = take(C);
    ln2_bias = take(C);
    fc_weight = take(C * H);
    fc_bias = take(H);
    fcproj_weight = take(H * C);
    fcproj_bias = take(C);
  }
};

template <typename T>
struct FinalNormTensors {
  T* weight;  // (C)
  T* bias;    // (C)
  FinalNormTensors(T* base, const GPT2Config& config) : weight(base), bias(base + config.n_embd) {}
};

// Fills `out[i - range.begin]` with the initial value of flat element i of `unit` for i in
// `range` (elements past the unit's tensors, i.e. padding, are 0). Initialisation as in
// Hugging Face: weights and embeddings N(0, initializer_range), GPT-2's residual projections
// (attn.c_proj.weight, mlp.c_proj.weight) N(0, initializer_range / sqrt(2·L)), biases 0,
// norm weights 1, padded vocabulary rows 0. Element values depend only on (seed, Hugging
// Face tensor name, element index in the tensor), so any sharding initialises identically.
void init_unit_range(const GPT2Config& config, const UnitSpec& unit, std::uint64_t seed,
                     ElementRange range, float* out);

}  // namespace zero::gpt2
