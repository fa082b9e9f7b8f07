// The decoder families (family.h): each family's config.json keys and defaults, tensor names and
// choices, in one table per family.
#include "zero/gpt2/family.h"

#include <algorithm>
#include <initializer_list>
#include <span>
#include <string>
#include <utility>

#include "zero/core/error.h"

namespace zero::gpt2 {
namespace {

using F = ConfigField;
using V = ConfigValue;

// GPT-2's keys in the order GPT2Config::to_json_text has always written them (n_ctx: n_positions
// again, as Hugging Face writes it; read too, n_positions winning when both are given).
constexpr ConfigKey kGpt2Keys[] = {
    {"vocab_size", F::kVocabSize, V::kInt},
    {"n_positions", F::kPositions, V::kInt},
    {"n_ctx", F::kPositions, V::kInt},
    {"n_embd", F::kEmbd, V::kInt},
    {"n_layer", F::kLayer, V::kInt},
    {"n_head", F::kHead, V::kInt},
    {"n_inner", F::kInner, V::kIntOrNull},
    {"activation_function", F::kActivation, V::kString},
    {"layer_norm_epsilon", F::kNormEpsilon, V::kFloat},
    {"initializer_range", F::kInitializerRange, V::kFloat},
    {"resid_pdrop", F::kResidPdrop, V::kFloat},
    {"embd_pdrop", F::kEmbdPdrop, V::kFloat},
    {"attn_pdrop", F::kAttnPdrop, V::kFloat},
    {"tie_word_embeddings", F::kTieWordEmbeddings, V::kBool},
    {"bos_token_id", F::kBosTokenId, V::kTokenIds},
    {"eos_token_id", F::kEosTokenId, V::kTokenIds},
};

// The keys LlamaConfig, MistralConfig and Qwen2Config share, in transformers 4.46's order.
// clang-format off
#define ZERO_LLAMA_SHAPE_KEYS                                \
  {"vocab_size", F::kVocabSize, V::kInt},                    \
  {"max_position_embeddings", F::kPositions, V::kInt},       \
  {"hidden_size", F::kEmbd, V::kInt},                        \
  {"intermediate_size", F::kInner, V::kInt},                 \
  {"num_hidden_layers", F::kLayer, V::kInt},                 \
  {"num_attention_heads", F::kHead, V::kInt},                \
  {"num_key_value_heads", F::kKvHead, V::kIntOrNull},        \
  {"hidden_act", F::kActivation, V::kString},                \
  {"initializer_range", F::kInitializerRange, V::kFloat},    \
  {"rms_norm_eps", F::kNormEpsilon, V::kFloat},              \
  {"rope_theta", F::kRopeTheta, V::kFloat}
#define ZERO_LLAMA_TAIL_KEYS                                 \
  {"attention_dropout", F::kAttnPdrop, V::kFloat},           \
  {"tie_word_embeddings", F::kTieWordEmbeddings, V::kBool},  \
  {"bos_token_id", F::kBosTokenId, V::kTokenIds},            \
  {"eos_token_id", F::kEosTokenId, V::kTokenIds}
// clang-format on

constexpr ConfigKey kLlamaKeys[] = {
    ZERO_LLAMA_SHAPE_KEYS,
    {"head_dim", F::kHeadDim, V::kIntOrNull},
    {"rope_scaling", F::kRopeScaling, V::kRopeScaling},
    {"attention_bias", F::kAttentionBias, V::kBool},
    {"mlp_bias", F::kMlpBias, V::kBool},
    ZERO_LLAMA_TAIL_KEYS,
};
constexpr ConfigKey kMistralKeys[] = {
    ZERO_LLAMA_SHAPE_KEYS,
    {"head_dim", F::kHeadDim, V::kIntOrNull},
    {"sliding_window", F::kSlidingWindow, V::kIntOrNull},
    ZERO_LLAMA_TAIL_KEYS,
};
constexpr ConfigKey kQwen2Keys[] = {
    ZERO_LLAMA_SHAPE_KEYS,
    {"rope_scaling", F::kRopeScaling, V::kRopeScaling},
    {"use_sliding_window", F::kUseSlidingWindow, V::kBool},
    {"sliding_window", F::kSlidingWindow, V::kIntOrNull},
    ZERO_LLAMA_TAIL_KEYS,
};
#undef ZERO_LLAMA_SHAPE_KEYS
#undef ZERO_LLAMA_TAIL_KEYS

constexpr FamilySpec kFamilies[] = {
    {ModelFamily::kGpt2, "gpt2", "GPT2LMHeadModel", "GPT2ForSequenceClassification", "GPT-2",
     NormKind::kLayerNorm, MlpKind::kGelu, PositionKind::kLearned, WeightLayout::kInOut, true,
     false, false, "transformer.", "h", "ln_f", kGpt2Keys},
    {ModelFamily::kLlama, "llama", "LlamaForCausalLM", "LlamaForSequenceClassification", "Llama",
     NormKind::kRmsNorm, MlpKind::kSwiGlu, PositionKind::kRope, WeightLayout::kOutIn, false, false,
     true, "model.", "layers", "norm", kLlamaKeys},
    {ModelFamily::kMistral, "mistral", "MistralForCausalLM", "MistralForSequenceClassification",
     "Mistral", NormKind::kRmsNorm, MlpKind::kSwiGlu, PositionKind::kRope, WeightLayout::kOutIn,
     false, false, true, "model.", "layers", "norm", kMistralKeys},
    {ModelFamily::kQwen2, "qwen2", "Qwen2ForCausalLM", "Qwen2ForSequenceClassification", "Qwen2",
     NormKind::kRmsNorm, MlpKind::kSwiGlu, PositionKind::kRope, WeightLayout::kOutIn, false, true,
     true, "model.", "layers", "norm", kQwen2Keys},
};

bool llama_like(const GPT2Config& config) { return config.family != ModelFamily::kGpt2; }

}  // namespace

std::string_view name_of(ModelFamily family) { return family_spec(family).display_name; }

const FamilySpec& family_spec(ModelFamily family) {
  for (const FamilySpec& spec : kFamilies)
    if (spec.family == family) return spec;
  ZERO_THROW("unknown model family ", static_cast<int>(family));
}

const FamilySpec& family_of_model_type(std::string_view model_type) {
  for (const FamilySpec& spec : kFamilies)
    if (spec.model_type == model_type) return spec;
  if (model_type == "qwen3")
    ZERO_THROW(
        "config.json model_type 'qwen3': Qwen3's q/k norms (q_norm, k_norm) are not "
        "implemented; zero reads model_type gpt2, llama, mistral and qwen2");
  ZERO_THROW("config.json model_type '", model_type,
             "' is not a family zero reads (gpt2, llama, mistral, qwen2)");
}

GPT2Config family_defaults(ModelFamily family) {
  GPT2Config config;
  config.family = family;
  if (family == ModelFamily::kGpt2) return config;
  // LlamaConfig's defaults, then what MistralConfig and Qwen2Config change.
  config.vocab_size = 32000;
  config.n_positions = 2048;
  config.n_embd = 4096;
  config.n_inner = 11008;
  config.n_layer = 32;
  config.n_head = 32;
  config.activation_function = "silu";
  config.layer_norm_epsilon = 1e-6;
  config.tie_word_embeddings = false;
  config.resid_pdrop = config.embd_pdrop = config.attn_pdrop = 0.0;
  config.bos_token_id = 1;
  config.eos_token_id = 2;
  if (family == ModelFamily::kMistral) {
    config.n_inner = 14336;
    config.n_kv_head = 8;
    config.n_positions = 4096 * 32;
    config.sliding_window = 4096;
  } else if (family == ModelFamily::kQwen2) {
    config.vocab_size = 151936;
    config.n_inner = 22016;
    config.n_positions = 32768;
    config.sliding_window = 4096;
    config.use_sliding_window = false;
    config.bos_token_id = config.eos_token_id = -1;
  }
  return config;
}

std::string_view key_name(ModelFamily family, ConfigField field) {
  for (const ConfigKey& key : family_spec(family).keys)
    if (key.field == field) return key.name;
  return "?";
}

std::string heads_text(const GPT2Config& config) {
  std::string text = std::to_string(config.n_head);
  if (config.kv_heads() != config.n_head)
    text += " (" + std::to_string(config.kv_heads()) + " key/value)";
  return text;
}

BlockWidths block_widths(const GPT2Config& config) {
  const std::int64_t HS = config.head_size(), H = config.hidden_size();
  BlockWidths widths;
  widths.q = config.n_head * HS;
  widths.kv = config.kv_heads() * HS;
  widths.qkv = widths.q + 2 * widths.kv;
  widths.mlp_hidden = H;
  widths.mlp_in = family_spec(config.family).mlp == MlpKind::kSwiGlu ? 2 * H : H;
  return widths;
}

std::vector<TensorSpec> embedding_tensors(const GPT2Config& config) {
  const std::int64_t Vp = config.padded_vocab_size(), C = config.n_embd;
  if (!llama_like(config))
    return {{"wte.weight", {Vp, C}}, {"wpe.weight", {config.n_positions, C}}};
  return {{"embed_tokens.weight", {Vp, C}}};
}

// GPT-2's matrices are Conv1D's [in, out]; the Llama family's nn.Linear's [out, in] (units.h).
std::vector<TensorSpec> block_tensors(const GPT2Config& config) {
  const std::int64_t C = config.n_embd, H = config.hidden_size();
  if (!llama_like(config))
    return {{"ln_1.weight", {C}},
            {"ln_1.bias", {C}},
            {"attn.c_attn.weight", {C, 3 * C}},
            {"attn.c_attn.bias", {3 * C}},
            {"attn.c_proj.weight", {C, C}},
            {"attn.c_proj.bias", {C}},
            {"ln_2.weight", {C}},
            {"ln_2.bias", {C}},
            {"mlp.c_fc.weight", {C, H}},
            {"mlp.c_fc.bias", {H}},
            {"mlp.c_proj.weight", {H, C}},
            {"mlp.c_proj.bias", {C}}};
  const BlockWidths widths = block_widths(config);
  const bool qkv_bias = family_spec(config.family).qkv_biases || config.attention_bias;
  // Linears one GEMM computes together keep their weights adjacent and then their biases, so the
  // fused weight (q, k and v stacked: ((NH + 2·KVH)·HS, C); gate and up: (2H, C)) and the fused
  // bias are each one contiguous range of the unit (units.h).
  std::vector<TensorSpec> tensors;
  auto linears = [&](std::initializer_list<std::pair<const char*, std::int64_t>> outs,
                     std::int64_t in, bool bias) {
    for (const auto& [name, out] : outs)
      tensors.push_back({std::string(name) + ".weight", {out, in}});
    if (bias)
      for (const auto& [name, out] : outs) tensors.push_back({std::string(name) + ".bias", {out}});
  };
  tensors.push_back({"input_layernorm.weight", {C}});
  linears({{"self_attn.q_proj", widths.q},
           {"self_attn.k_proj", widths.kv},
           {"self_attn.v_proj", widths.kv}},
          C, qkv_bias);
  linears({{"self_attn.o_proj", C}}, widths.q, config.attention_bias);
  tensors.push_back({"post_attention_layernorm.weight", {C}});
  linears({{"mlp.gate_proj", H}, {"mlp.up_proj", H}}, C, config.mlp_bias);
  linears({{"mlp.down_proj", C}}, H, config.mlp_bias);
  return tensors;
}

std::vector<TensorSpec> final_tensors(const GPT2Config& config) {
  const std::int64_t C = config.n_embd;
  if (!llama_like(config)) return {{"ln_f.weight", {C}}, {"ln_f.bias", {C}}};
  std::vector<TensorSpec> tensors = {{"norm.weight", {C}}};
  if (!config.tie_word_embeddings)
    tensors.push_back({"lm_head.weight", {config.padded_vocab_size(), C}});
  return tensors;
}

BlockRole block_role(ModelFamily family, std::string_view tensor_name) {
  struct Entry {
    std::string_view name;
    BlockRole role;
  };
  using enum BlockRole;
  static constexpr Entry kGpt2Roles[] = {
      {"ln_1.weight", kNorm1Weight},        {"ln_1.bias", kNorm1Bias},
      {"attn.c_attn.weight", kQkvWeight},   {"attn.c_attn.bias", kQkvBias},
      {"attn.c_proj.weight", kOutWeight},   {"attn.c_proj.bias", kOutBias},
      {"ln_2.weight", kNorm2Weight},        {"ln_2.bias", kNorm2Bias},
      {"mlp.c_fc.weight", kMlpInWeight},    {"mlp.c_fc.bias", kMlpInBias},
      {"mlp.c_proj.weight", kMlpOutWeight}, {"mlp.c_proj.bias", kMlpOutBias}};
  static constexpr Entry kLlamaRoles[] = {
      {"input_layernorm.weight", kNorm1Weight}, {"self_attn.q_proj.weight", kQkvWeight},
      {"self_attn.k_proj.weight", kContinued},  {"self_attn.v_proj.weight", kContinued},
      {"self_attn.q_proj.bias", kQkvBias},      {"self_attn.k_proj.bias", kContinued},
      {"self_attn.v_proj.bias", kContinued},    {"self_attn.o_proj.weight", kOutWeight},
      {"self_attn.o_proj.bias", kOutBias},      {"post_attention_layernorm.weight", kNorm2Weight},
      {"mlp.gate_proj.weight", kMlpInWeight},   {"mlp.up_proj.weight", kContinued},
      {"mlp.gate_proj.bias", kMlpInBias},       {"mlp.up_proj.bias", kContinued},
      {"mlp.down_proj.weight", kMlpOutWeight},  {"mlp.down_proj.bias", kMlpOutBias}};
  const std::span<const Entry> roles =
      family == ModelFamily::kGpt2 ? std::span<const Entry>(kGpt2Roles) : kLlamaRoles;
  for (const Entry& entry : roles)
    if (entry.name == tensor_name) return entry.role;
  ZERO_THROW(name_of(family), " block: no tensor named '", tensor_name, "'");
}

bool is_norm_weight(ModelFamily family, std::string_view tensor_name) {
  if (family == ModelFamily::kGpt2)
    return tensor_name.starts_with("ln_") && tensor_name.ends_with(".weight");
  return tensor_name.ends_with("norm.weight");
}

bool is_scaled_residual(ModelFamily family, std::string_view tensor_name) {
  return family == ModelFamily::kGpt2 &&
         (tensor_name == "attn.c_proj.weight" || tensor_name == "mlp.c_proj.weight");
}

bool is_vocabulary_matrix(ModelFamily family, std::string_view tensor_name) {
  if (family == ModelFamily::kGpt2) return tensor_name == "wte.weight";
  return tensor_name == "embed_tokens.weight" || tensor_name == "lm_head.weight";
}

bool is_hf_buffer(ModelFamily family, std::string_view stored_name) {
  if (family == ModelFamily::kGpt2)
    return stored_name.ends_with(".attn.bias") || stored_name.ends_with(".attn.masked_bias");
  return stored_name.ends_with(".rotary_emb.inv_freq");
}

int hf_state_dict_rank(ModelFamily family, std::string_view tensor_name) {
  // Each family's modules in the order its transformers model registers them (GPT2LMHeadModel;
  // LlamaForCausalLM, MistralForCausalLM and Qwen2ForCausalLM: embed_tokens, then each decoder
  // layer's self_attn, mlp, input_layernorm, post_attention_layernorm, then norm and lm_head).
  static constexpr std::string_view kGpt2Modules[] = {
      "wte", "wpe", "ln_1", "attn.c_attn", "attn.c_proj", "ln_2", "mlp.c_fc", "mlp.c_proj", "ln_f"};
  static constexpr std::string_view kLlamaModules[] = {"embed_tokens",
                                                       "self_attn.q_proj",
                                                       "self_attn.k_proj",
                                                       "self_attn.v_proj",
                                                       "self_attn.o_proj",
                                                       "mlp.gate_proj",
                                                       "mlp.up_proj",
                                                       "mlp.down_proj",
                                                       "input_layernorm",
                                                       "post_attention_layernorm",
                                                       "norm",
                                                       "lm_head"};
  const std::span<const std::string_view> modules =
      family == ModelFamily::kGpt2 ? std::span<const std::string_view>(kGpt2Modules)
                                   : std::span<const std::string_view>(kLlamaModules);
  const bool bias = tensor_name.ends_with(".bias");
  const std::string_view module = tensor_name.substr(0, tensor_name.rfind('.'));
  const auto found = std::find(modules.begin(), modules.end(), module);
  ZERO_CHECK(found != modules.end() && (bias || tensor_name.ends_with(".weight")), "tensor '",
             tensor_name, "' is not a parameter of ", family_spec(family).architecture);
  return 2 * static_cast<int>(found - modules.begin()) + (bias ? 1 : 0);
}

std::int64_t largest_module_parameters(const GPT2Config& config) {
  const std::int64_t C = config.n_embd, H = config.hidden_size(), V = config.vocab_size;
  if (!llama_like(config))
    return std::max({V * C, config.n_positions * C, C * H + H, H * C + C, 3 * C * C + 3 * C});
  // One module per linear layer (q, k, v, o, gate, up, down), the embedding and the head.
  std::int64_t largest = V * C;
  const std::vector<TensorSpec> tensors = block_tensors(config);
  for (const TensorSpec& tensor : tensors) {
    if (!tensor.name.ends_with(".weight") || tensor.shape.size() != 2) continue;
    const std::int64_t out = tensor.shape[0], in = tensor.shape[1];
    const std::string bias = tensor.name.substr(0, tensor.name.size() - 6) + "bias";
    const bool has_bias = std::any_of(tensors.begin(), tensors.end(),
                                      [&](const TensorSpec& t) { return t.name == bias; });
    largest = std::max(largest, out * in + (has_bias ? out : 0));
  }
  return largest;
}

}  // namespace zero::gpt2
