// The decoder families: what each Hugging Face family is to zero's one decoder config
// (GPT2Config): its config.json keys and defaults, its tensor names, and its choices of norm, MLP,
// position encoding, biases and head. Everything GPT-2, Llama, Mistral and Qwen2 differ in is
// here; docs/model.md says how a fourth family is added.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "zero/core/flat_buffer.h"
#include "zero/gpt2/config.h"
#include "zero/gpt2/layer_kinds.h"

namespace zero::gpt2 {

// The GPT2Config field a config.json key sets, and how its value is read and written.
enum class ConfigField : std::uint8_t {
  kVocabSize,
  kPositions,
  kEmbd,
  kLayer,
  kHead,
  kKvHead,
  kHeadDim,
  kInner,
  kNormEpsilon,
  kActivation,
  kInitializerRange,
  kTieWordEmbeddings,
  kResidPdrop,
  kEmbdPdrop,
  kAttnPdrop,
  kBosTokenId,
  kEosTokenId,
  kRopeTheta,
  kRopeScaling,
  kAttentionBias,
  kMlpBias,
  kSlidingWindow,
  kUseSlidingWindow
};
// kIntOrNull: null is 0 (unset); kTokenIds: an id, null (-1) or a list of ids (eos_token_id keeps
// the list, bos_token_id its first); kRopeScaling: null or {"rope_type": "llama3", ...}.
enum class ConfigValue : std::uint8_t {
  kInt,
  kIntOrNull,
  kFloat,
  kBool,
  kString,
  kTokenIds,
  kRopeScaling
};
struct ConfigKey {
  std::string_view name;  // config.json's
  ConfigField field;
  ConfigValue value;
};

struct FamilySpec {
  ModelFamily family;
  std::string_view model_type;    // config.json's: "llama"
  std::string_view architecture;  // written to config.json's architectures: "LlamaForCausalLM"
  // A sequence classifier's (classifier.h): "LlamaForSequenceClassification"
  std::string_view classifier_architecture;
  std::string_view display_name;  // in messages: "Llama"
  NormKind norm;
  MlpKind mlp;
  PositionKind positions;
  WeightLayout linear_layout;   // of every linear layer in a block
  bool linear_biases;           // every linear layer has a bias (GPT-2)
  bool qkv_biases;              // q/k/v biases whatever attention_bias says (Qwen2)
  bool untied_allowed;          // tie_word_embeddings false: lm_head.weight is a tensor of its own
  std::string_view hf_prefix;   // of every tensor but lm_head.weight: "transformer." / "model."
  std::string_view block_unit;  // the blocks' unit names: "h" (h.0, h.1, ...) / "layers"
  std::string_view final_unit;  // "ln_f" / "norm"
  std::span<const ConfigKey> keys;  // config.json's keys the family reads, in the order written
};

std::string_view name_of(ModelFamily family);  // "GPT-2", "Llama", "Mistral", "Qwen2"
const FamilySpec& family_spec(ModelFamily family);
// The family of config.json's model_type. Throws zero::Error naming it for one zero does not read
// (model_type qwen3: Qwen3's q/k norms; anything else: the families zero reads).
const FamilySpec& family_of_model_type(std::string_view model_type);
// The config of a family's config.json without keys: Hugging Face's defaults for the family
// (transformers 4.46's LlamaConfig, MistralConfig, Qwen2Config, GPT2Config).
GPT2Config family_defaults(ModelFamily family);
// The family's config.json name of a field ("hidden_size" for Llama's n_embd), for messages.
std::string_view key_name(ModelFamily family, ConfigField field);

// NH for messages: "12", or "32 (8 key/value)" with grouped-query attention.
std::string heads_text(const GPT2Config& config);

// A decoder block's widths in elements per token row.
struct BlockWidths {
  std::int64_t q;           // NH·HS
  std::int64_t kv;          // KVH·HS, each of k and v
  std::int64_t qkv;         // (NH + 2·KVH)·HS: q, k and v side by side
  std::int64_t mlp_in;      // the first MLP GEMM's output: H (GELU) or 2H (SwiGLU's gate and up)
  std::int64_t mlp_hidden;  // H: the second MLP GEMM's input
};
BlockWidths block_widths(const GPT2Config& config);

// The tensors of each unit in flat order (units.h documents the layouts): the embeddings, one
// block, and the final unit (the final norm and, untied, lm_head.weight).
std::vector<TensorSpec> embedding_tensors(const GPT2Config& config);
std::vector<TensorSpec> block_tensors(const GPT2Config& config);
std::vector<TensorSpec> final_tensors(const GPT2Config& config);
// The part a block tensor plays in the decoder's passes (compute_passes.cc), the same for every
// family: the first tensor of each GEMM's operand names it (q_proj.weight starts q/k/v's fused
// weight, which k_proj.weight and v_proj.weight continue: kContinued; gate_proj starts the MLP's
// first GEMM, up_proj continues it). Throws zero::Error for a name that is not the family's.
enum class BlockRole : std::uint8_t {
  kNorm1Weight,
  kNorm1Bias,
  kQkvWeight,
  kQkvBias,
  kOutWeight,
  kOutBias,
  kNorm2Weight,
  kNorm2Bias,
  kMlpInWeight,
  kMlpInBias,
  kMlpOutWeight,
  kMlpOutBias,
  kContinued
};
inline constexpr int kBlockRoles = 12;  // the roles before kContinued
BlockRole block_role(ModelFamily family, std::string_view tensor_name);

// Whether a tensor of a unit is a norm's weight (initialised to 1) and whether it is a residual
// projection GPT-2 initialises with std / sqrt(2L).
bool is_norm_weight(ModelFamily family, std::string_view tensor_name);
bool is_scaled_residual(ModelFamily family, std::string_view tensor_name);

// Hugging Face files (hf_weights.h, checkpoint_hf.h). Whether a unit tensor has one row per
// vocabulary entry (GPT-2's wte; the Llama family's embed_tokens and lm_head): Vp rows in the
// unit, V in the files (the padding rows are dropped on save and read as zero).
bool is_vocabulary_matrix(ModelFamily family, std::string_view tensor_name);
// Whether a stored name is a buffer transformers ignores on load (GPT-2's attn.bias and
// attn.masked_bias, older Llama-family files' self_attn.rotary_emb.inv_freq): skipped on load.
bool is_hf_buffer(ModelFamily family, std::string_view stored_name);
// The place of a unit's tensor in the family's Hugging Face state dict, relative to the unit's
// other tensors: modules in the order the HF model registers them (a Llama block lists self_attn
// and mlp before its two norms), a weight before its bias. transformers' save_pretrained shards
// in this order. Throws zero::Error naming a tensor the family's HF model does not have.
int hf_state_dict_rank(ModelFamily family, std::string_view tensor_name);

// DeepSpeed's largest layer of the Hugging Face model (deepspeed.runtime.zero.stage3.
// model_to_params): the most parameters one torch module holds directly.
std::int64_t largest_module_parameters(const GPT2Config& config);

}  // namespace zero::gpt2
