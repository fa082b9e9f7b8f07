// GPT2Config: the Hugging Face GPT-2 config.json keys, run_clm-style overrides, derived sizes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace zero::gpt2 {

// Model letters used across zero::gpt2: B batch, T sequence length, C = n_embd, NH = n_head,
// HS = C / NH, L = n_layer, V = vocab_size, Vp = V padded to a multiple of 128, H = MLP width.
struct GPT2Config {
  std::int64_t vocab_size = 50257;  // V
  std::int64_t n_positions = 1024;  // maximum T
  std::int64_t n_embd = 768;        // C
  std::int64_t n_layer = 12;        // L
  std::int64_t n_head = 12;         // NH
  std::int64_t n_inner = 0;         // H; 0 (JSON null) means 4 * C
  double layer_norm_epsilon = 1e-5;
  std::string activation_function = "gelu_new";  // gelu_new / gelu_pytorch_tanh (same formula)
  double initializer_range = 0.02;
  bool tie_word_embeddings = true;  // only tied embeddings are supported
  double resid_pdrop = 0.1;
  double embd_pdrop = 0.1;
  double attn_pdrop = 0.1;
  std::int64_t bos_token_id = 50256;
  std::int64_t eos_token_id = 50256;

  static constexpr std::int64_t kVocabAlignment = 128;

  std::int64_t padded_vocab_size() const;  // Vp
  std::int64_t head_size() const { return n_embd / n_head; }
  std::int64_t hidden_size() const { return n_inner > 0 ? n_inner : 4 * n_embd; }

  // Throws zero::Error for a config the model cannot run: non-positive sizes, n_embd not
  // divisible by n_head, dropout outside [0, 1), an unsupported activation, untied embeddings.
  void validate() const;

  // Applies "key=value,key=value" (Hugging Face run_clm --config_overrides). Keys are the
  // config.json names above; an unknown key, a malformed pair or a bad number throws zero::Error
  // naming it (and the nearest known key). Validates the result.
  void apply_overrides(std::string_view overrides);

  // config.json text. Unknown keys in the file are ignored (HF configs carry many that do not
  // change the model); known keys with the wrong type throw. n_ctx is read as n_positions.
  static GPT2Config from_json_text(std::string_view text);
  std::string to_json_text() const;  // HF-compatible config.json (model_type gpt2)

  static GPT2Config load(const std::filesystem::path& config_json);
  void save(const std::filesystem::path& config_json) const;

  // GPT-2 124M (the HF "gpt2" checkpoint's config).
  static GPT2Config gpt2_124m() { return GPT2Config{}; }
  // Parameter count with the unpadded vocabulary (tied lm_head counted once).
  std::int64_t num_parameters() const;
};

}  // namespace zero::gpt2
