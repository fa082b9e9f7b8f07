// Hugging Face safetensors of the Llama family (Llama, Mistral, Qwen2) through zero's units and
// back, transformers 4.46 the oracle. tests/golden/llama_weights_reference.py builds tiny random
// models of each family (grouped-query attention, Qwen2's q/k/v biases, Llama's attention and MLP
// biases, tied and untied heads, vocabularies not a multiple of 128) and saves them: fp32, bf16,
// fp32 sharded at 40 KB (the embeddings larger than a shard), and bf16 sharded in a Hub cache
// (models--org--name/snapshots/<hash>/). zero reads each into its units (HFWeights::read_unit over
// each unit's layout) and writes it (resave_hf_checkpoint). At the original's dtype and shard size
// the shard files and model.safetensors.index.json are transformers' (the index byte for byte); at
// the 5GB default one model.safetensors; with a small override several shards. transformers then
// loads every output with no missing or unexpected tensor and every tensor bitwise equal to the
// original. zero's index at the 5GB default for the real 7B/8B/70B configs in configs/models equals
// save_pretrained's split. Without the reference (ZERO_PYTHON, torch or transformers missing) those
// cases skip, saying so; the error cases (a missing tensor, a wrong shape, an unexpected tensor
// name the tensor and the file) run on zero's own files.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "../common/golden.h"
#include "../common/test_data.h"
#include "zero/checkpoint/safetensors.h"
#include "zero/gpt2/checkpoint_hf.h"
#include "zero/gpt2/hf_weights.h"
#include "zero/train/hub_cache.h"

namespace zero::gpt2 {
namespace {

namespace fs = std::filesystem;
using testing::error_of;
using testing::read_bytes;

// The weight files of a folder by name (model.safetensors, shards, the index).
std::set<std::string> weight_files(const fs::path& folder) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(folder)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("model")) names.insert(name);
  }
  return names;
}

DType dtype_named(const std::string& name) {
  return name == "bfloat16" ? DType::kBFloat16 : DType::kFloat32;
}

class LlamaWeightsGolden : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    folder_ = testing::scratch_dir("llama_weights");
    const char* source = std::getenv("ZERO_SOURCE_DIR");
    const fs::path configs = fs::path(source != nullptr ? source : ".") / "configs" / "models";
    status_ = testing::run_golden_script(
        "llama_weights_reference.py",
        "build \"" + (folder_ / "reference").string() + "\" \"" + configs.string() + "\"");
    if (status_ == 0) {
      std::ifstream file(folder_ / "reference" / "cases.json");
      cases_ = nlohmann::json::parse(file);
    }
  }
  static void TearDownTestSuite() { fs::remove_all(folder_); }
  void SetUp() override {
    ASSERT_TRUE(status_ == 0 || status_ == 3) << "llama_weights_reference.py exited " << status_;
  }
  static bool have_reference() { return status_ == 0; }

  static inline fs::path folder_;
  static inline int status_ = 0;
  static inline nlohmann::json cases_;
};

TEST_F(LlamaWeightsGolden, TransformersLoadsWhatZeroSavesBitwise) {
  if (!have_reference())
    GTEST_SKIP() << "torch/transformers not importable by ZERO_PYTHON (llama_weights_reference.py "
                    "exit 3): the round trip through transformers did not run";
  nlohmann::json pairs = nlohmann::json::array();
  int folders = 0;
  for (const auto& item : cases_["cases"]) {
    const std::string name = item["case"];
    for (const auto& variant : item["variants"]) {
      const std::string variant_name = variant["name"];
      SCOPED_TRACE(name + "/" + variant_name);
      const fs::path original =
          variant.contains("hub_id")
              ? train::resolve_hub_folder("--model_name_or_path", variant["hub_id"], "main",
                                          cases_["hub"].get<std::string>())
              : folder_ / "reference" / name / variant_name;
      const std::size_t shard_bytes = variant["max_shard_bytes"];
      const std::string dtype = variant["dtype"];
      const HFWeights weights(original, load_hf_config(original));
      EXPECT_EQ(weights.stored_dtype(), dtype_named(dtype));
      const fs::path ours = folder_ / "ours" / name / variant_name;
      // As the original was written: the same files, the same index.
      resave_hf_checkpoint(original, ours / "same",
                           {.dtype = weights.stored_dtype(), .max_shard_bytes = shard_bytes});
      std::set<std::string> expected = weight_files(original);
      EXPECT_EQ(weight_files(ours / "same"), expected);
      if (expected.contains(kHfWeightsIndexName)) {
        EXPECT_EQ(read_bytes(ours / "same" / kHfWeightsIndexName),
                  read_bytes(original / kHfWeightsIndexName));
      }
      // transformers' 5GB default: one file for these.
      resave_hf_checkpoint(original, ours / "default", {.dtype = weights.stored_dtype()});
      EXPECT_EQ(weight_files(ours / "default"), std::set<std::string>{kHfWeightsName});
      // A small override: several shards and the index.
      resave_hf_checkpoint(original, ours / "small",
                           {.dtype = weights.stored_dtype(), .max_shard_bytes = 30'000});
      EXPECT_TRUE(fs::exists(ours / "small" / kHfWeightsIndexName));
      EXPECT_GT(weight_files(ours / "small").size(), 3u);
      for (const char* kind : {"same", "default", "small"}) {
        pairs.push_back(
            {{"original", original.string()}, {"saved", (ours / kind).string()}, {"dtype", dtype}});
        ++folders;
      }
    }
  }
  EXPECT_EQ(folders, 5 * 4 * 3);
  std::ofstream(folder_ / "pairs.json") << pairs.dump();
  EXPECT_EQ(testing::run_golden_script("llama_weights_reference.py",
                                       "check \"" + (folder_ / "pairs.json").string() + "\""),
            0)
      << "transformers did not load zero's files as the originals (its message above)";
}

TEST_F(LlamaWeightsGolden, FiveGigabyteIndexOfTheRealConfigsIsTransformers) {
  if (!have_reference())
    GTEST_SKIP() << "torch/transformers not importable by ZERO_PYTHON (llama_weights_reference.py "
                    "exit 3): save_pretrained's split of the real configs was not computed";
  const char* source = std::getenv("ZERO_SOURCE_DIR");
  ASSERT_NE(source, nullptr);
  int indexes = 0;
  for (const auto& name : cases_["configs"]) {
    const GPT2Config config =
        load_hf_config(fs::path(source) / "configs" / "models" / name.get<std::string>());
    for (const char* dtype : {"float32", "bfloat16"}) {
      SCOPED_TRACE(name.get<std::string>() + " " + dtype);
      const std::string expected = read_bytes(folder_ / "reference" / "index" /
                                              (name.get<std::string>() + "." + dtype + ".json"));
      EXPECT_FALSE(expected.empty());  // a 7B model is sharded at 5GB
      EXPECT_EQ(hf_index_json(config, {.dtype = dtype_named(dtype)}), expected);
      ++indexes;
    }
  }
  int real_configs = 0;  // every folder of configs/models was split by transformers
  for (const fs::directory_entry& entry :
       fs::directory_iterator(fs::path(source) / "configs" / "models"))
    real_configs += fs::exists(entry.path() / "config.json") ? 1 : 0;
  EXPECT_GE(real_configs, 5);
  EXPECT_EQ(indexes, 2 * real_configs);
}

// A tiny untied Llama saved by zero, copied with one tensor dropped, reshaped or added.
class LlamaWeightErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(folder_ / "good");
    std::ofstream(folder_ / "good" / "config.json")
        << R"({"model_type": "llama", "vocab_size": 300, "hidden_size": 64,
               "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 8,
               "num_key_value_heads": 2, "max_position_embeddings": 128,
               "tie_word_embeddings": false})";
    config_ = load_hf_config(folder_ / "good");
    GPT2Model model(config_, allocator_);
    model.init(3);
    save_hf_checkpoint(model, folder_ / "good");
  }
  void TearDown() override { fs::remove_all(folder_); }

  // The good folder's tensors with `drop` left out, `reshape` given one row less (its values
  // truncated) and `add` added (a vector of 4), in another folder.
  fs::path broken(const std::string& folder, const std::string& drop, const std::string& reshape,
                  const std::string& add) {
    const SafetensorsReader reader(folder_ / "good" / kHfWeightsName);
    SafetensorsWriter writer;
    for (const SafetensorsTensor& tensor : reader.tensors()) {
      if (tensor.name == drop) continue;
      std::vector<std::int64_t> shape = tensor.shape;
      if (tensor.name == reshape) --shape[0];
      const std::vector<float> values = reader.read_float(tensor.name);
      writer.add_float(tensor.name, DType::kFloat32, shape, values.data());
    }
    const std::vector<float> extra(4, 1.0f);
    if (!add.empty()) writer.add_float(add, DType::kFloat32, {4}, extra.data());
    writer.set_metadata("format", "pt");
    fs::create_directories(folder_ / folder);
    writer.write(folder_ / folder / kHfWeightsName);
    fs::copy_file(folder_ / "good" / "config.json", folder_ / folder / "config.json");
    return folder_ / folder;
  }

  fs::path folder_ = testing::scratch_dir("llama_weight_errors");
  MemoryLedger ledger_;
  HostAllocator allocator_{ledger_};
  GPT2Config config_;
};

void expect_names(const std::string& message, const std::vector<std::string>& parts) {
  for (const std::string& part : parts)
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
}

TEST_F(LlamaWeightErrors, MissingMisshapenAndUnexpectedTensorsNameTheTensorAndTheFile) {
  EXPECT_EQ(error_of([&] { HFWeights(folder_ / "good", config_); }), "");
  fs::path folder = broken("missing", "model.layers.1.mlp.up_proj.weight", "", "");
  expect_names(error_of([&] { HFWeights(folder, config_); }),
               {"model.layers.1.mlp.up_proj.weight", (folder / kHfWeightsName).string()});
  folder = broken("untied_without_head", "lm_head.weight", "", "");
  expect_names(error_of([&] { HFWeights(folder, config_); }),
               {"'lm_head.weight'", (folder / kHfWeightsName).string()});
  folder = broken("shape", "", "model.layers.0.self_attn.k_proj.weight", "");
  expect_names(error_of([&] { HFWeights(folder, config_); }),
               {"model.layers.0.self_attn.k_proj.weight", (folder / kHfWeightsName).string(),
                "(15, 64)", "(16, 64)"});
  folder = broken("unexpected", "", "", "model.layers.0.self_attn.q_norm.weight");
  expect_names(error_of([&] { HFWeights(folder, config_); }),
               {"unexpected tensor 'model.layers.0.self_attn.q_norm.weight'",
                (folder / kHfWeightsName).string(), "Llama of 2 layers"});
  // A buffer transformers ignores (older files' rotary inv_freq) is skipped, as it skips it.
  folder = broken("buffer", "", "", "model.layers.0.self_attn.rotary_emb.inv_freq");
  EXPECT_EQ(error_of([&] { HFWeights(folder, config_); }), "");
}

}  // namespace
}  // namespace zero::gpt2
