// GPT2Config: config.json reading/writing, run_clm-style overrides and validation.
#include "zero/gpt2/config.h"

#include <charconv>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "zero/core/error.h"
#include "zero/core/suggest.h"

namespace zero::gpt2 {
namespace {

enum class KeyType { kInt, kFloat, kBool, kString };

struct Key {
  std::string_view name;
  KeyType type;
};

constexpr Key kKeys[] = {
    {"vocab_size", KeyType::kInt},
    {"n_positions", KeyType::kInt},
    {"n_embd", KeyType::kInt},
    {"n_layer", KeyType::kInt},
    {"n_head", KeyType::kInt},
    {"n_inner", KeyType::kInt},
    {"layer_norm_epsilon", KeyType::kFloat},
    {"activation_function", KeyType::kString},
    {"initializer_range", KeyType::kFloat},
    {"tie_word_embeddings", KeyType::kBool},
    {"resid_pdrop", KeyType::kFloat},
    {"embd_pdrop", KeyType::kFloat},
    {"attn_pdrop", KeyType::kFloat},
    {"bos_token_id", KeyType::kInt},
    {"eos_token_id", KeyType::kInt},
};

const Key* find_key(std::string_view name) {
  for (const Key& key : kKeys)
    if (key.name == name) return &key;
  return nullptr;
}

std::string nearest_hint(std::string_view name) {
  std::vector<std::string_view> names;
  for (const Key& key : kKeys) names.push_back(key.name);
  if (auto nearest = zero::nearest_name(name, names)) return "; did you mean '" + *nearest + "'?";
  std::string all;
  for (const Key& key : kKeys) all += (all.empty() ? "" : ", ") + std::string(key.name);
  return "; known keys: " + all;
}

// Sets field `name` of `config` from a JSON value of the key's type.
void set_field(GPT2Config& config, std::string_view name, const nlohmann::json& value) {
  auto as_int = [&]() -> std::int64_t {
    ZERO_CHECK(value.is_number_integer(), "GPT-2 config key '", name, "' must be an integer, got ",
               value.dump());
    return value.get<std::int64_t>();
  };
  auto as_float = [&]() -> double {
    ZERO_CHECK(value.is_number(), "GPT-2 config key '", name, "' must be a number, got ",
               value.dump());
    return value.get<double>();
  };
  if (name == "vocab_size")
    config.vocab_size = as_int();
  else if (name == "n_positions")
    config.n_positions = as_int();
  else if (name == "n_embd")
    config.n_embd = as_int();
  else if (name == "n_layer")
    config.n_layer = as_int();
  else if (name == "n_head")
    config.n_head = as_int();
  else if (name == "n_inner")
    config.n_inner = value.is_null() ? 0 : as_int();
  else if (name == "layer_norm_epsilon")
    config.layer_norm_epsilon = as_float();
  else if (name == "initializer_range")
    config.initializer_range = as_float();
  else if (name == "resid_pdrop")
    config.resid_pdrop = as_float();
  else if (name == "embd_pdrop")
    config.embd_pdrop = as_float();
  else if (name == "attn_pdrop")
    config.attn_pdrop = as_float();
  else if (name == "bos_token_id")
    config.bos_token_id = value.is_null() ? -1 : as_int();
  else if (name == "eos_token_id")
    config.eos_token_id = value.is_null() ? -1 : as_int();
  else if (name == "activation_function") {
    ZERO_CHECK(value.is_string(), "GPT-2 config key 'activation_function' must be a string, got ",
               value.dump());
    config.activation_function = value.get<std::string>();
  } else if (name == "tie_word_embeddings") {
    ZERO_CHECK(value.is_boolean(),
               "GPT-2 config key 'tie_word_embeddings' must be true or false, got ", value.dump());
    config.tie_word_embeddings = value.get<bool>();
  } else {
    ZERO_THROW("unknown GPT-2 config key '", name, "'", nearest_hint(name));
  }
}

// Parses an override value as the key's type ("1024", "1e-5", "true", "gelu_new").
nlohmann::json parse_override_value(const Key& key, std::string_view text) {
  auto bad = [&](std::string_view expected) {
    ZERO_THROW("config_overrides: bad value '", text, "' for '", key.name, "': expected ",
               expected);
  };
  switch (key.type) {
    case KeyType::kInt: {
      if (text == "None" || text == "null") return nullptr;
      std::int64_t value = 0;
      auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (error != std::errc() || end != text.data() + text.size() || text.empty())
        bad("an integer");
      return value;
    }
    case KeyType::kFloat: {
      double value = 0;
      auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (error != std::errc() || end != text.data() + text.size() || text.empty()) bad("a number");
      return value;
    }
    case KeyType::kBool:
      if (text == "true" || text == "True" || text == "1") return true;
      if (text == "false" || text == "False" || text == "0") return false;
      bad("true or false");
      return nullptr;
    case KeyType::kString: return std::string(text);
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
  const std::int64_t C = n_embd, H = hidden_size();
  const std::int64_t per_block =
      4 * C + (C * 3 * C + 3 * C) + (C * C + C) + (C * H + H) + (H * C + C);
  return vocab_size * C + n_positions * C + n_layer * per_block + 2 * C;
}

void GPT2Config::validate() const {
  ZERO_CHECK(vocab_size > 0, "GPT-2 config: vocab_size must be positive, got ", vocab_size);
  ZERO_CHECK(n_positions > 0, "GPT-2 config: n_positions must be positive, got ", n_positions);
  ZERO_CHECK(n_embd > 0, "GPT-2 config: n_embd must be positive, got ", n_embd);
  ZERO_CHECK(n_layer > 0, "GPT-2 config: n_layer must be positive, got ", n_layer);
  ZERO_CHECK(n_head > 0, "GPT-2 config: n_head must be positive, got ", n_head);
  ZERO_CHECK(n_inner >= 0, "GPT-2 config: n_inner must be positive or null, got ", n_inner);
  ZERO_CHECK(n_embd % n_head == 0, "GPT-2 config: n_embd (", n_embd,
             ") is not divisible by n_head (", n_head, ")");
  ZERO_CHECK(layer_norm_epsilon > 0, "GPT-2 config: layer_norm_epsilon must be positive, got ",
             layer_norm_epsilon);
  ZERO_CHECK(activation_function == "gelu_new" || activation_function == "gelu_pytorch_tanh",
             "GPT-2 config: activation_function '", activation_function,
             "' is not supported (gelu_new or gelu_pytorch_tanh)");
  ZERO_CHECK(tie_word_embeddings, "GPT-2 config: untied word embeddings are not supported");
  for (auto [name, p] : {std::pair{"resid_pdrop", resid_pdrop}, std::pair{"embd_pdrop", embd_pdrop},
                         std::pair{"attn_pdrop", attn_pdrop}})
    ZERO_CHECK(p >= 0 && p < 1, "GPT-2 config: ", name, " must be in [0, 1), got ", p);
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
               "' is not key=value (expected e.g. \"n_embd=1024,n_head=16\")");
    const std::string_view name = trim(pair.substr(0, equals));
    const std::string_view value = trim(pair.substr(equals + 1));
    const Key* key = find_key(name);
    ZERO_CHECK(key != nullptr, "config_overrides: unknown key '", name, "'", nearest_hint(name));
    set_field(*this, name, parse_override_value(*key, value));
  }
  validate();
}

GPT2Config GPT2Config::from_json_text(std::string_view text) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& error) {
    ZERO_THROW("GPT-2 config.json is not valid JSON: ", error.what());
  }
  ZERO_CHECK(json.is_object(), "GPT-2 config.json must be a JSON object");
  if (json.contains("model_type") && json["model_type"].is_string())
    ZERO_CHECK(json["model_type"] == "gpt2", "config.json model_type is '",
               json["model_type"].get<std::string>(), "', expected 'gpt2'");
  GPT2Config config;
  if (json.contains("n_ctx") && !json.contains("n_positions"))
    set_field(config, "n_positions", json["n_ctx"]);
  for (auto& [name, value] : json.items())
    if (find_key(name) != nullptr) set_field(config, name, value);
  config.validate();
  return config;
}

std::string GPT2Config::to_json_text() const {
  nlohmann::ordered_json json;
  json["architectures"] = {"GPT2LMHeadModel"};
  json["model_type"] = "gpt2";
  json["vocab_size"] = vocab_size;
  json["n_positions"] = n_positions;
  json["n_ctx"] = n_positions;
  json["n_embd"] = n_embd;
  json["n_layer"] = n_layer;
  json["n_head"] = n_head;
  json["n_inner"] = n_inner > 0 ? nlohmann::ordered_json(n_inner) : nlohmann::ordered_json(nullptr);
  json["activation_function"] = activation_function;
  json["layer_norm_epsilon"] = layer_norm_epsilon;
  json["initializer_range"] = initializer_range;
  json["resid_pdrop"] = resid_pdrop;
  json["embd_pdrop"] = embd_pdrop;
  json["attn_pdrop"] = attn_pdrop;
  json["tie_word_embeddings"] = tie_word_embeddings;
  json["bos_token_id"] = bos_token_id;
  json["eos_token_id"] = eos_token_id;
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
