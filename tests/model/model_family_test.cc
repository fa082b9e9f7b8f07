// The decoder families (family.h): the five real config.json files under configs/models give the
// parameter counts issue 38 states (independent of zero), each family's keys read and written back
// as its own, what zero does not implement refused naming the field, overrides in the family's
// key names, and the units' tensors named and shaped as Hugging Face's.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "../common/test_data.h"
#include "zero/gpt2/config.h"
#include "zero/gpt2/family.h"
#include "zero/gpt2/units.h"

namespace zero::gpt2 {
namespace {

using testing::error_of;

// configs/models/<name>/config.json of the source tree (ZERO_SOURCE_DIR, set by ctest).
std::filesystem::path model_config(const std::string& name) {
  const char* source = std::getenv("ZERO_SOURCE_DIR");
  if (source == nullptr) ADD_FAILURE() << "ZERO_SOURCE_DIR is not set (run through ctest)";
  return std::filesystem::path(source != nullptr ? source : ".") / "configs" / "models" / name /
         "config.json";
}

void expect_error(const std::function<void()>& action, const std::string& expected) {
  const std::string message = error_of(action);
  EXPECT_NE(message.find(expected), std::string::npos) << message;
}

// Issue 38's counts: Hugging Face's model.num_parameters() of each published model.
TEST(ModelFamily, RealConfigsHaveTheIssuesParameterCounts) {
  const std::pair<const char*, std::int64_t> models[] = {{"Llama-2-7b-hf", 6'738'415'616},
                                                         {"Llama-3.1-8B", 8'030'261'248},
                                                         {"Mistral-7B-v0.1", 7'241'732'096},
                                                         {"Qwen2.5-7B", 7'615'616'512},
                                                         {"Llama-3.1-70B", 70'553'706'496}};
  for (const auto& [name, parameters] : models) {
    const GPT2Config config = GPT2Config::load(model_config(name));
    EXPECT_EQ(config.num_parameters(), parameters) << name;
  }
}

TEST(ModelFamily, ReadsEachFamilysKeys) {
  const GPT2Config llama3 = GPT2Config::load(model_config("Llama-3.1-8B"));
  EXPECT_EQ(llama3.family, ModelFamily::kLlama);
  EXPECT_EQ(llama3.n_embd, 4096);
  EXPECT_EQ(llama3.n_inner, 14336);
  EXPECT_EQ(llama3.n_positions, 131072);
  EXPECT_EQ(llama3.kv_heads(), 8);
  EXPECT_EQ(llama3.head_size(), 128);
  EXPECT_EQ(llama3.rope_theta, 500000.0);
  EXPECT_EQ(llama3.rope_scaling, (RopeScaling{RopeScaling::Type::kLlama3, 8.0, 1.0, 4.0, 8192}));
  EXPECT_EQ(llama3.layer_norm_epsilon, 1e-5);
  EXPECT_FALSE(llama3.tie_word_embeddings);
  EXPECT_EQ(llama3.bos_token_id, 128000);
  const GPT2Config mistral = GPT2Config::load(model_config("Mistral-7B-v0.1"));
  EXPECT_EQ(mistral.family, ModelFamily::kMistral);
  EXPECT_EQ(mistral.active_sliding_window(), 4096);
  const GPT2Config qwen = GPT2Config::load(model_config("Qwen2.5-7B"));
  EXPECT_EQ(qwen.family, ModelFamily::kQwen2);
  EXPECT_EQ(qwen.sliding_window, 131072);
  EXPECT_EQ(qwen.active_sliding_window(), 0);  // use_sliding_window false
  EXPECT_EQ(qwen.layer_norm_epsilon, 1e-6);
  EXPECT_EQ(qwen.rope_theta, 1e6);
}

TEST(ModelFamily, WritesTheFamilysOwnConfigJsonAndReadsItBack) {
  GPT2Config config = GPT2Config::load(model_config("Llama-3.1-8B"));
  config.eos_token_ids = {128001, 128008, 128009};  // Llama 3.1 Instruct's list
  const std::string text = config.to_json_text();
  for (const char* written : {"\"model_type\": \"llama\"", "\"LlamaForCausalLM\"",
                              "\"hidden_size\": 4096", "\"num_key_value_heads\": 8",
                              "\"rope_type\": \"llama3\"", "\"tie_word_embeddings\": false"})
    EXPECT_NE(text.find(written), std::string::npos) << written << " not in\n" << text;
  EXPECT_EQ(text.find("n_embd"), std::string::npos) << text;
  const GPT2Config again = GPT2Config::from_json_text(text);
  EXPECT_EQ(again.to_json_text(), text);
  EXPECT_EQ(again.eos_token_id, 128001);
  EXPECT_EQ(again.eos_token_ids, (std::vector<std::int64_t>{128001, 128008, 128009}));
  EXPECT_EQ(again.num_parameters(), config.num_parameters());
  for (const char* name : {"Mistral-7B-v0.1", "Qwen2.5-7B"}) {
    const GPT2Config other = GPT2Config::load(model_config(name));
    const GPT2Config read = GPT2Config::from_json_text(other.to_json_text());
    EXPECT_EQ(read.to_json_text(), other.to_json_text()) << name;
    EXPECT_EQ(read.family, other.family) << name;
    EXPECT_EQ(read.active_sliding_window(), other.active_sliding_window()) << name;
  }
  // GPT-2's file stays GPT-2's.
  const std::string gpt2 = GPT2Config().to_json_text();
  EXPECT_NE(gpt2.find("\"model_type\": \"gpt2\""), std::string::npos);
  EXPECT_NE(gpt2.find("\"n_embd\": 768"), std::string::npos);
}

TEST(ModelFamily, RefusesWhatZeroDoesNotImplementNamingTheField) {
  expect_error([] { GPT2Config::from_json_text(R"({"model_type": "qwen3"})"); },
               "Qwen3's q/k norms");
  expect_error([] { GPT2Config::from_json_text(R"({"model_type": "gemma"})"); },
               "model_type 'gemma' is not a family zero reads");
  expect_error(
      [] {
        GPT2Config::from_json_text(
            R"({"model_type": "llama", "rope_scaling": {"type": "linear", "factor": 2.0}})");
      },
      "rope_scaling type 'linear' is not implemented");
  expect_error(
      [] {
        GPT2Config::from_json_text(R"({"model_type": "llama", "rope_scaling": {"rope_type":
          "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}})");
      },
      "original_max_position_embeddings");
  expect_error(
      [] { GPT2Config::from_json_text(R"({"model_type": "llama", "hidden_act": "gelu"})"); },
      "hidden_act 'gelu'");
  expect_error(
      [] {
        GPT2Config::from_json_text(
            R"({"model_type": "mistral", "num_attention_heads": 32, "num_key_value_heads": 5})");
      },
      "num_attention_heads (32) is not a multiple of num_key_value_heads (5)");
  const GPT2Config mistral = GPT2Config::load(model_config("Mistral-7B-v0.1"));
  mistral.check_sequence_length(4096);
  expect_error([&] { mistral.check_sequence_length(8192); },
               "sliding_window 4096 is shorter than the sequence length 8192");
  GPT2Config::load(model_config("Qwen2.5-7B")).check_sequence_length(32768);  // window off
  expect_error([] { GPT2Config::load(model_config("Llama-2-7b-hf")).check_sequence_length(8192); },
               "larger than the model's max_position_embeddings 4096");
  // GPT-2 stays tied; the Llama family may untie.
  expect_error([] { GPT2Config::from_json_text(R"({"tie_word_embeddings": false})"); },
               "untied word embeddings are not supported");
}

TEST(ModelFamily, OverridesTakeTheFamilysKeyNames) {
  GPT2Config config = GPT2Config::load(model_config("Llama-3.1-8B"));
  config.apply_overrides(
      "num_hidden_layers=2,hidden_size=64,num_attention_heads=4,num_key_value_heads=2,"
      "intermediate_size=96,vocab_size=300,tie_word_embeddings=true");
  EXPECT_EQ(config.n_layer, 2);
  EXPECT_EQ(config.n_embd, 64);
  EXPECT_EQ(config.kv_heads(), 2);
  EXPECT_EQ(config.hidden_size(), 96);
  EXPECT_TRUE(config.tie_word_embeddings);
  expect_error([&] { GPT2Config(config).apply_overrides("n_embd=64"); },
               "unknown key 'n_embd' (Llama's config.json keys)");
  expect_error([] { GPT2Config().apply_overrides("hidden_size=64"); },
               "it is a key of model_type llama, mistral, qwen2: give that model's config.json");
  expect_error([&] { GPT2Config(config).apply_overrides("hiden_size=64"); },
               "did you mean 'hidden_size'");
  expect_error([&] { GPT2Config(config).apply_overrides("num_key_value_heads=3"); },
               "not a multiple of num_key_value_heads (3)");
}

// A tiny Qwen2 (q/k/v biases, grouped-query attention) and a tiny Llama (tied, and untied).
TEST(ModelFamily, UnitsNameAndShapeTensorsAsHuggingFace) {
  GPT2Config qwen = family_defaults(ModelFamily::kQwen2);
  qwen.apply_overrides(
      "vocab_size=300,hidden_size=64,num_hidden_layers=2,num_attention_heads=8,"
      "num_key_value_heads=2,intermediate_size=96");
  const std::vector<UnitSpec> units = gpt2_units(qwen);
  ASSERT_EQ(units.size(), 4u);
  EXPECT_EQ(units[1].name, "layers.0");
  const FlatLayout block(units[2].tensors, 1, 1);
  EXPECT_EQ(block.slot("self_attn.q_proj.weight").num_elements, 64u * 64u);
  EXPECT_EQ(block.slot("self_attn.k_proj.weight").num_elements, 16u * 64u);  // 2 heads of 8
  EXPECT_EQ(block.slot("self_attn.v_proj.bias").num_elements, 16u);
  EXPECT_EQ(block.slot("mlp.down_proj.weight").num_elements, 64u * 96u);
  EXPECT_EQ(hf_tensor_name(units[2], "self_attn.k_proj.weight"),
            "model.layers.1.self_attn.k_proj.weight");
  EXPECT_EQ(hf_tensor_name(units[0], "embed_tokens.weight"), "model.embed_tokens.weight");
  EXPECT_EQ(hf_tensor_name(units[3], "norm.weight"), "model.norm.weight");
  EXPECT_EQ(hf_tensor_name(units[3], "lm_head.weight"), "lm_head.weight");
  bool has_o_bias = false;
  for (const TensorSpec& tensor : units[1].tensors)
    has_o_bias |= tensor.name == "self_attn.o_proj.bias";
  EXPECT_FALSE(has_o_bias) << "Qwen2 biases q, k and v only";
  EXPECT_EQ(units[3].tensors.size(), 2u) << "untied: norm.weight and lm_head.weight";
  GPT2Config tied = qwen;
  tied.tie_word_embeddings = true;
  EXPECT_EQ(gpt2_units(tied).back().tensors.size(), 1u);
  EXPECT_EQ(qwen.num_parameters() - tied.num_parameters(), 300 * 64);
}

}  // namespace
}  // namespace zero::gpt2
