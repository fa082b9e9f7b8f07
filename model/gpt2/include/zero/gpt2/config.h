// GPT2Config: the one decoder config of zero::gpt2 (GPT-2 and the Llama family, family.h), read
// from and written as each family's Hugging Face config.json, run_clm-style overrides, derived
// sizes. The name is GPT-2's for history (docs/model.md): it describes every family.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "zero/gpt2/rope.h"

namespace zero::gpt2 {

// The decoder families zero reads (family.h says what each one is). config.json's model_type.
enum class ModelFamily : std::uint8_t { kGpt2, kLlama, kMistral, kQwen2 };

// Model letters used across zero::gpt2: B batch, T sequence length, C = n_embd, NH = n_head,
// KVH = key/value heads (NH without grouped-query attention), HS = head size (C / NH unless the
// config says head_dim), L = n_layer, V = vocab_size, Vp = V padded to a multiple of 128,
// H = MLP width. The fields carry GPT-2's config.json names; family.h maps each family's keys
// onto them (hidden_size -> n_embd, max_position_embeddings -> n_positions, rms_norm_eps ->
// layer_norm_epsilon, ...).
struct GPT2Config {
  ModelFamily family = ModelFamily::kGpt2;  // config.json model_type
  std::int64_t vocab_size = 50257;          // V
  std::int64_t n_positions = 1024;          // maximum T
  std::int64_t n_embd = 768;                // C
  std::int64_t n_layer = 12;                // L
  std::int64_t n_head = 12;                 // NH
  std::int64_t n_inner = 0;                 // H; 0 (JSON null) means 4 * C
  double layer_norm_epsilon = 1e-5;         // the norm's epsilon (LayerNorm's or RMSNorm's)
  // gelu_new / gelu_pytorch_tanh (same formula) for GPT-2; silu (SwiGLU's gate) for the Llama
  // family (hidden_act).
  std::string activation_function = "gelu_new";
  double initializer_range = 0.02;
  bool tie_word_embeddings = true;  // GPT-2: tied only; the Llama family: either
  double resid_pdrop = 0.1;
  double embd_pdrop = 0.1;
  double attn_pdrop = 0.1;
  std::int64_t bos_token_id = 50256;  // -1: none (null)
  std::int64_t eos_token_id = 50256;  // the first when config.json gives a list
  // config.json's eos_token_id when it is a list (Llama 3.1: [128001, 128008, 128009]); empty
  // when it is one id. Written back as the list.
  std::vector<std::int64_t> eos_token_ids;

  // The Llama family's (0 / false / none for GPT-2; family.h, docs/model.md):
  std::int64_t n_kv_head = 0;       // num_key_value_heads: KVH; 0 means NH (no grouping)
  std::int64_t head_dim = 0;        // HS; 0 means C / NH
  double rope_theta = 10000.0;      // RoPE's base
  RopeScaling rope_scaling;         // rope_scaling of type llama3, or none
  bool attention_bias = false;      // q/k/v/o biases (Llama's attention_bias; Qwen2: q/k/v always)
  bool mlp_bias = false;            // gate/up/down biases (Llama's mlp_bias)
  std::int64_t sliding_window = 0;  // attention window in tokens; 0: none (null)
  bool use_sliding_window = true;   // Qwen2's switch (false by default there); Mistral: always on

  static constexpr std::int64_t kVocabAlignment = 128;

  std::int64_t padded_vocab_size() const;  // Vp
  std::int64_t head_size() const { return head_dim > 0 ? head_dim : n_embd / n_head; }
  std::int64_t kv_heads() const { return n_kv_head > 0 ? n_kv_head : n_head; }
  std::int64_t hidden_size() const { return n_inner > 0 ? n_inner : 4 * n_embd; }
  // The attention window the model applies, in tokens; 0: none.
  std::int64_t active_sliding_window() const { return use_sliding_window ? sliding_window : 0; }

  // Throws zero::Error for a config the model cannot run, naming the config.json key of its
  // family: non-positive sizes, n_embd not divisible by n_head (without head_dim), n_head not a
  // multiple of the key/value heads, dropout outside [0, 1), an unsupported activation, untied
  // GPT-2 embeddings.
  void validate() const;
  // Throws zero::Error when the model cannot run sequences of `seq_len` tokens: longer than
  // n_positions, or a sliding window shorter (zero does not implement the window).
  void check_sequence_length(std::int64_t seq_len) const;

  // Applies "key=value,key=value" (Hugging Face run_clm --config_overrides). Keys are the
  // family's config.json names (n_embd for GPT-2, hidden_size for Llama); an unknown key, a
  // malformed pair or a bad number throws zero::Error naming it (and the nearest known key).
  // Validates the result.
  void apply_overrides(std::string_view overrides);

  // config.json text of any family (family.h; model_type absent: gpt2). Unknown keys in the file
  // are ignored (HF configs carry many that do not change the model); known keys with the wrong
  // type throw; what zero does not implement (another model_type, another rope_scaling type,
  // Qwen3's q/k norms) throws naming it. GPT-2's n_ctx is read as n_positions.
  static GPT2Config from_json_text(std::string_view text);
  // HF-compatible config.json of the family (model_type and architectures its own).
  std::string to_json_text() const;

  static GPT2Config load(const std::filesystem::path& config_json);
  void save(const std::filesystem::path& config_json) const;

  // GPT-2 124M (the HF "gpt2" checkpoint's config).
  static GPT2Config gpt2_124m() { return GPT2Config{}; }
  // Parameter count with the unpadded vocabulary (tied lm_head counted once): the units'
  // (units.h) tensors without the vocabulary's padding rows.
  std::int64_t num_parameters() const;
};

}  // namespace zero::gpt2
