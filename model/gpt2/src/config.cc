// GPT2Config: config.json reading/writing through the family's keys (family.h), run_clm-style
// overrides and validation.
#include "zero/gpt2/config.h"

#include <charconv>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "zero/core/error.h"
#include "zero/core/suggest.h"
#include "zero/gpt2/family.h"
#include "zero/gpt2/units.h"

namespace zero::gpt2 {
namespace {

using F = ConfigField;
using V = ConfigValue;

const ConfigKey* find_key(ModelFamily family, std::string_view name) {
  for (const ConfigKey& key : family_spec(family).keys)
    if (key.name == name) return &key;
  return nullptr;
}

// A key of other families only ("hidden_size" given to GPT-2): the overrides apply to the config
// they change, so that family's config.json is needed first.
std::string other_families_hint(ModelFamily family, std::string_view name) {
  std::string owners;
  for (ModelFamily other :
       {ModelFamily::kGpt2, ModelFamily::kLlama, ModelFamily::kMistral, ModelFamily::kQwen2})
    if (other != family && find_key(other, name) != nullptr)
      owners += (owners.empty() ? "" : ", ") + std::string(family_spec(other).model_type);
  if (owners.empty()) return "";
  return "; it is a key of model_type " + owners +
         ": give that model's config.json (--config_name " + "DIR) and override its keys";
}

std::string nearest_hint(ModelFamily family, std::string_view name) {
  if (std::string other = other_families_hint(family, name); !other.empty()) return other;
  std::vector<std::string_view> names;
  for (const ConfigKey& key : family_spec(family).keys) names.push_back(key.name);
  if (auto nearest = zero::nearest_name(name, names)) return "; did you mean '" + *nearest + "'?";
  std::string all;
  for (std::string_view key : names) all += (all.empty() ? "" : ", ") + std::string(key);
  return "; known keys: " + all;
}

RopeScaling rope_scaling_of(const nlohmann::json& value) {
  if (value.is_null()) return {};
  ZERO_CHECK(value.is_object(), "config key 'rope_scaling' must be an object or null, got ",
             value.dump());
  const char* type_key = value.contains("rope_type") ? "rope_type" : "type";
  const std::string type = value.contains(type_key) && value[type_key].is_string()
                               ? value[type_key].get<std::string>()
                               : "";
  if (type == "default") return {};
  ZERO_CHECK(type == "llama3", "config.json rope_scaling type '", type,
             "' is not implemented (zero implements rope_scaling type 'llama3' and none)");
  auto number = [&](const char* name) {
    ZERO_CHECK(value.contains(name) && value[name].is_number(), "config.json rope_scaling (llama3)",
               " needs a number '", name, "', got ", value.dump());
    return value[name].get<double>();
  };
  RopeScaling scaling;
  scaling.type = RopeScaling::Type::kLlama3;
  scaling.factor = number("factor");
  scaling.low_freq_factor = number("low_freq_factor");
  scaling.high_freq_factor = number("high_freq_factor");
  scaling.original_max_position_embeddings = number("original_max_position_embeddings");
  return scaling;
}

// Sets the field `key` names from a JSON value of the key's kind.
void set_field(GPT2Config& config, const ConfigKey& key, const nlohmann::json& value) {
  const std::string_view name = key.name;
  const std::string_view family = name_of(config.family);
  auto as_int = [&]() -> std::int64_t {
    if (key.value == V::kIntOrNull && value.is_null()) return 0;
    ZERO_CHECK(value.is_number_integer(), family, " config key '", name,
               "' must be an integer, got ", value.dump());
    return value.get<std::int64_t>();
  };
  auto as_float = [&]() -> double {
    ZERO_CHECK(value.is_number(), family, " config key '", name, "' must be a number, got ",
               value.dump());
    return value.get<double>();
  };
  auto as_bool = [&]() -> bool {
    ZERO_CHECK(value.is_boolean(), family, " config key '", name, "' must be true or false, got ",
               value.dump());
    return value.get<bool>();
  };
  // An id, null (-1) or a list of ids (the first, and the whole list kept for eos).
  auto as_token = [&](std::vector<std::int64_t>* list) -> std::int64_t {
    if (value.is_null()) return -1;
    if (!value.is_array()) return as_int();
    std::vector<std::int64_t> ids;
    for (const nlohmann::json& id : value) {
      ZERO_CHECK(id.is_number_integer(), family, " config key '", name,
                 "' must be an id or a list of ids, got ", value.dump());
      ids.push_back(id.get<std::int64_t>());
    }
    if (list != nullptr) *list = ids.size() > 1 ? ids : std::vector<std::int64_t>{};
    return ids.empty() ? -1 : ids.front();
  };
  switch (key.field) {
    case F::kVocabSize: config.vocab_size = as_int(); break;
    case F::kPositions: config.n_positions = as_int(); break;
    case F::kEmbd: config.n_embd = as_int(); break;
    case F::kLayer: config.n_layer = as_int(); break;
    case F::kHead: config.n_head = as_int(); break;
    case F::kKvHead: config.n_kv_head = as_int(); break;
    case F::kHeadDim: config.head_dim = as_int(); break;
    case F::kInner: config.n_inner = as_int(); break;
    case F::kSlidingWindow: config.sliding_window = as_int(); break;
    case F::kNormEpsilon: config.layer_norm_epsilon = as_float(); break;
    case F::kInitializerRange: config.initializer_range = as_float(); break;
    case F::kResidPdrop: config.resid_pdrop = as_float(); break;
    case F::kEmbdPdrop: config.embd_pdrop = as_float(); break;
    case F::kAttnPdrop: config.attn_pdrop = as_float(); break;
    case F::kRopeTheta: config.rope_theta = as_float(); break;
    case F::kTieWordEmbeddings: config.tie_word_embeddings = as_bool(); break;
    case F::kAttentionBias: config.attention_bias = as_bool(); break;
    case F::kMlpBias: config.mlp_bias = as_bool(); break;
    case F::kUseSlidingWindow: config.use_sliding_window = as_bool(); break;
    case F::kBosTokenId: config.bos_token_id = as_token(nullptr); break;
    case F::kEosTokenId: config.eos_token_id = as_token(&config.eos_token_ids); break;
    case F::kRopeScaling: config.rope_scaling = rope_scaling_of(value); break;
    case F::kActivation:
      ZERO_CHECK(value.is_string(), family, " config key '", name, "' must be a string, got ",
                 value.dump());
      config.activation_function = value.get<std::string>();
      break;
  }
}

// The JSON value of the field `key` names, as Hugging Face writes it.
nlohmann::ordered_json field_json(const GPT2Config& config, const ConfigKey& key) {
  using J = nlohmann::ordered_json;
  auto int_or_null = [&](std::int64_t value) { return value > 0 ? J(value) : J(nullptr); };
  auto token = [](std::int64_t id) { return id >= 0 ? J(id) : J(nullptr); };
  switch (key.field) {
    case F::kVocabSize: return config.vocab_size;
    case F::kPositions: return config.n_positions;
    case F::kEmbd: return config.n_embd;
    case F::kLayer: return config.n_layer;
    case F::kHead: return config.n_head;
    case F::kKvHead: return config.kv_heads();
    case F::kHeadDim: return config.head_size();
    case F::kInner:
      return key.value == V::kIntOrNull ? int_or_null(config.n_inner) : J(config.hidden_size());
    case F::kSlidingWindow: return int_or_null(config.sliding_window);
    case F::kNormEpsilon: return config.layer_norm_epsilon;
    case F::kInitializerRange: return config.initializer_range;
    case F::kResidPdrop: return config.resid_pdrop;
    case F::kEmbdPdrop: return config.embd_pdrop;
    case F::kAttnPdrop: return config.attn_pdrop;
    case F::kRopeTheta: return config.rope_theta;
    case F::kTieWordEmbeddings: return config.tie_word_embeddings;
    case F::kAttentionBias: return config.attention_bias;
    case F::kMlpBias: return config.mlp_bias;
    case F::kUseSlidingWindow: return config.use_sliding_window;
    case F::kActivation: return config.activation_function;
    case F::kBosTokenId: return token(config.bos_token_id);
    case F::kEosTokenId:
      return config.eos_token_ids.empty() ? token(config.eos_token_id) : J(config.eos_token_ids);
    case F::kRopeScaling: {
      if (!config.rope_scaling.enabled()) return nullptr;
      const RopeScaling& scaling = config.rope_scaling;
      return {{"factor", scaling.factor},
              {"high_freq_factor", scaling.high_freq_factor},
              {"low_freq_factor", scaling.low_freq_factor},
              {"original_max_position_embeddings",
               static_cast<std::int64_t>(scaling.original_max_position_embeddings)},
              {"rope_type", "llama3"}};
    }
  }
  return nullptr;
}

// Parses an override value as the key's kind ("1024", "1e-5", "true", "gelu_new", "None").
nlohmann::json parse_override_value(const ConfigKey& key, std::string_view text) {
  auto bad = [&](std::string_view expected) {
    ZERO_THROW("config_overrides: bad value '", text, "' for '", key.name, "': expected ",
               expected);
  };
  switch (key.value) {
    case V::kInt:
    case V::kIntOrNull:
    case V::kTokenIds: {
      if (text == "None" || text == "null") return nullptr;
      std::int64_t value = 0;
      auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (error != std::errc() || end != text.data() + text.size() || text.empty())
        bad("an integer");
      return value;
    }
    case V::kFloat: {
      double value = 0;
      auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (error != std::errc() || end != text.data() + text.size() || text.empty()) bad("a number");
      return value;
    }
    case V::kBool:
      if (text == "true" || text == "True" || text == "1") return true;
      if (text == "false" || text == "False" || text == "0") return false;
      bad("true or false");
      return nullptr;
    case V::kString: return std::string(text);
    case V::kRopeScaling:
      if (text == "None" || text == "null") return nullptr;
      bad("None (rope_scaling is read from config.json, not overridden)");
      return nullptr;
  }
  return nullptr;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

}  // namespace

std::int64_t GPT2Config::padded_vocab_size() const {
  return (vocab_size + kVocabAlignment - 1) / kVocabAlignment * kVocabAlignment;
}

std::int64_t GPT2Config::num_parameters() const {
  std::int64_t count = 0;
  for (const UnitSpec& unit : gpt2_units(*this))
    count += static_cast<std::int64_t>(unit.num_elements());
  // The padding rows of wte / embed_tokens, and of an untied lm_head.
  const std::int64_t padding_rows = (padded_vocab_size() - vocab_size) *
                                    (family != ModelFamily::kGpt2 && !tie_word_embeddings ? 2 : 1);
  return count - padding_rows * n_embd;
}

void GPT2Config::validate() const {
  const std::string family_name(name_of(family));
  auto key = [&](ConfigField field) { return key_name(family, field); };
  auto positive = [&](std::int64_t value, ConfigField field) {
    ZERO_CHECK(value > 0, family_name, " config: ", key(field), " must be positive, got ", value);
  };
  positive(vocab_size, ConfigField::kVocabSize);
  positive(n_positions, ConfigField::kPositions);
  positive(n_embd, ConfigField::kEmbd);
  positive(n_layer, ConfigField::kLayer);
  positive(n_head, ConfigField::kHead);
  ZERO_CHECK(n_inner >= 0, family_name, " config: ", key(ConfigField::kInner),
             " must be positive or null, got ", n_inner);
  ZERO_CHECK(n_kv_head >= 0 && head_dim >= 0 && sliding_window >= 0, family_name,
             " config: num_key_value_heads, head_dim and sliding_window must be positive or null, "
             "got ",
             n_kv_head, ", ", head_dim, ", ", sliding_window);
  ZERO_CHECK(head_dim > 0 || n_embd % n_head == 0, family_name,
             " config: ", key(ConfigField::kEmbd), " (", n_embd, ") is not divisible by ",
             key(ConfigField::kHead), " (", n_head, ")");
  ZERO_CHECK(n_head % kv_heads() == 0, family_name, " config: ", key(ConfigField::kHead), " (",
             n_head, ") is not a multiple of num_key_value_heads (", kv_heads(), ")");
  ZERO_CHECK(layer_norm_epsilon > 0, family_name, " config: ", key(ConfigField::kNormEpsilon),
             " must be positive, got ", layer_norm_epsilon);
  for (auto [name, p] : {std::pair{key(ConfigField::kResidPdrop), resid_pdrop},
                         std::pair{key(ConfigField::kEmbdPdrop), embd_pdrop},
                         std::pair{key(ConfigField::kAttnPdrop), attn_pdrop}})
    ZERO_CHECK(p >= 0 && p < 1, family_name, " config: ", name, " must be in [0, 1), got ", p);
  if (family == ModelFamily::kGpt2) {
    ZERO_CHECK(activation_function == "gelu_new" || activation_function == "gelu_pytorch_tanh",
               "GPT-2 config: activation_function '", activation_function,
               "' is not supported (gelu_new or gelu_pytorch_tanh)");
    ZERO_CHECK(tie_word_embeddings, "GPT-2 config: untied word embeddings are not supported");
    ZERO_CHECK(n_kv_head == 0 && head_dim == 0 && !rope_scaling.enabled() && sliding_window == 0,
               "GPT-2 config: grouped-query attention, head_dim, rope_scaling and sliding_window "
               "are the Llama family's");
    return;
  }
  ZERO_CHECK(activation_function == "silu", family_name, " config: hidden_act '",
             activation_function, "' is not supported (silu: SwiGLU)");
  // The rotary parameters as the kernels check them (rope.h): one check of theta, head size and
  // llama3 scaling, named by the family.
  try {
    gpt2::validate(RopeParameters{head_size(), rope_theta, rope_scaling});
  } catch (const Error& error) {
    ZERO_THROW(family_name, " config: ", error.what());
  }
}

void GPT2Config::check_sequence_length(std::int64_t seq_len) const {
  ZERO_CHECK(seq_len <= n_positions, "sequence length ", seq_len, " is larger than the model's ",
             key_name(family, ConfigField::kPositions), " ", n_positions);
  const std::int64_t window = active_sliding_window();
  ZERO_CHECK(window == 0 || window >= seq_len, name_of(family), " config: sliding_window ", window,
             " is shorter than the sequence length ", seq_len,
             " (--block_size): zero does not implement sliding-window attention; use a block "
             "size of at most ",
             window);
}

void GPT2Config::apply_overrides(std::string_view overrides) {
  std::string_view rest = overrides;
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    std::string_view pair = trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (pair.empty()) continue;
    const std::size_t equals = pair.find('=');
    ZERO_CHECK(equals != std::string_view::npos, "config_overrides: '", pair,
               "' is not key=value (expected e.g. \"", key_name(family, ConfigField::kEmbd),
               "=1024,", key_name(family, ConfigField::kHead), "=16\")");
    const std::string_view name = trim(pair.substr(0, equals));
    const std::string_view value = trim(pair.substr(equals + 1));
    const ConfigKey* key = find_key(family, name);
    ZERO_CHECK(key != nullptr, "config_overrides: unknown key '", name, "' (", name_of(family),
               "'s config.json keys)", nearest_hint(family, name));
    set_field(*this, *key, parse_override_value(*key, value));
  }
  validate();
}

GPT2Config GPT2Config::from_json_text(std::string_view text) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& error) {
    ZERO_THROW("config.json is not valid JSON: ", error.what());
  }
  ZERO_CHECK(json.is_object(), "config.json must be a JSON object");
  ModelFamily family = ModelFamily::kGpt2;  // absent: GPT-2, as zero has always read
  if (json.contains("model_type") && json["model_type"].is_string())
    family = family_of_model_type(json["model_type"].get<std::string>()).family;
  GPT2Config config = family_defaults(family);
  // Keys in the file's (sorted) order: GPT-2's n_positions after n_ctx, so it wins.
  for (auto& [name, value] : json.items())
    if (const ConfigKey* key = find_key(family, name)) set_field(config, *key, value);
  config.validate();
  return config;
}

std::string GPT2Config::to_json_text() const {
  const FamilySpec& spec = family_spec(family);
  nlohmann::ordered_json json;
  json["architectures"] = {spec.architecture};
  json["model_type"] = spec.model_type;
  for (const ConfigKey& key : spec.keys) json[std::string(key.name)] = field_json(*this, key);
  json["torch_dtype"] = "float32";
  return json.dump(2) + "\n";
}

GPT2Config GPT2Config::load(const std::filesystem::path& config_json) {
  std::ifstream file(config_json);
  ZERO_CHECK(file.good(), "cannot open GPT-2 config ", config_json.string());
  std::stringstream text;
  text << file.rdbuf();
  try {
    return from_json_text(text.str());
  } catch (const Error& error) {
    ZERO_THROW(config_json.string(), ": ", error.what());
  }
}

void GPT2Config::save(const std::filesystem::path& config_json) const {
  std::ofstream file(config_json);
  ZERO_CHECK(file.good(), "cannot write GPT-2 config ", config_json.string());
  file << to_json_text();
  ZERO_CHECK(file.good(), "writing GPT-2 config ", config_json.string(), " failed");
}

}  // namespace zero::gpt2
