// The Llama family's shapes against transformers and DeepSpeed: tests/golden/
// model_family_reference.py builds tiny models of each family with transformers 4.46 (grouped-query
// attention, llama3 rope scaling, tied and untied heads, Llama's attention and MLP biases, a
// head_dim other than hidden_size / heads, Mistral's window, Qwen2's q/k/v biases) and writes their
// config.json, DeepSpeed's model_to_params (the parameter count and largest layer `zero estimate`
// and --deepspeed_compat print) and every parameter's name and shape. zero reads each config.json
// and must give the same count, the same largest layer, and units holding exactly those tensors.
// Skips when ZERO_PYTHON, torch, transformers or deepspeed is missing.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../common/golden.h"
#include "../common/test_data.h"
#include "zero/gpt2/config.h"
#include "zero/gpt2/family.h"
#include "zero/gpt2/units.h"

namespace zero::testing {
namespace {

// Every tensor of the units by Hugging Face name, the vocabulary's rows unpadded.
std::map<std::string, std::vector<std::int64_t>> unit_tensors(const gpt2::GPT2Config& config) {
  std::map<std::string, std::vector<std::int64_t>> tensors;
  for (const gpt2::UnitSpec& unit : gpt2::gpt2_units(config))
    for (const TensorSpec& tensor : unit.tensors) {
      std::vector<std::int64_t> shape = tensor.shape;
      if (unit.kind != gpt2::UnitKind::kBlock && shape.size() == 2 &&
          shape[0] == config.padded_vocab_size())
        shape[0] = config.vocab_size;
      tensors[gpt2::hf_tensor_name(unit, tensor.name)] = shape;
    }
  return tensors;
}

TEST(ModelFamilyGolden, CountsLargestLayerAndTensorsEqualTransformersAndDeepSpeed) {
  const std::filesystem::path out = scratch_dir("model_family_golden");
  const int code = run_golden_script("model_family_reference.py", "\"" + out.string() + "\"");
  if (code == 3) GTEST_SKIP() << "ZERO_PYTHON, torch, transformers or deepspeed is not available";
  ASSERT_EQ(code, 0) << "the reference script failed";
  int cases = 0;
  for (const auto& entry : std::filesystem::directory_iterator(out)) {
    SCOPED_TRACE(entry.path().filename().string());
    const gpt2::GPT2Config config = gpt2::GPT2Config::load(entry.path() / "config.json");
    std::ifstream file(entry.path() / "reference.json");
    const nlohmann::json reference = nlohmann::json::parse(file);
    EXPECT_EQ(config.num_parameters(), reference["total"].get<std::int64_t>());
    EXPECT_EQ(gpt2::largest_module_parameters(config), reference["largest"].get<std::int64_t>());
    std::map<std::string, std::vector<std::int64_t>> expected;
    for (const auto& [name, shape] : reference["tensors"].items())
      expected[name] = shape.get<std::vector<std::int64_t>>();
    EXPECT_EQ(unit_tensors(config), expected);
    ++cases;
  }
  EXPECT_EQ(cases, 5);
  std::filesystem::remove_all(out);
}

}  // namespace
}  // namespace zero::testing
