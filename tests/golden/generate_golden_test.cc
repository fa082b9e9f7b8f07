// Golden test: zero's generation with a KV cache against transformers 4.46's own greedy
// `generate(do_sample=False, use_cache=True)` (tests/golden/generate_reference.py), for a tiny
// random GPT-2 and each Llama-family case (grouped-query attention, llama3 scaling, biases,
// head_dim, Mistral, Qwen2, tied and untied heads): the same continuation, and the decoder's
// logits at every generated position within 1e-5 of transformers' in float64 from the same fp32
// weights (relative to their scale).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "../common/golden.h"
#include "../common/reference_params.h"
#include "../common/test_data.h"
#include "zero/checkpoint/safetensors.h"
#include "zero/core/allocator.h"
#include "zero/core/device_context.h"
#include "zero/core/memory_ledger.h"
#include "zero/gpt2/decoder.h"
#include "zero/gpt2/model.h"
#include "zero/gpt2/sampling.h"

namespace zero::gpt2 {
namespace {

namespace fs = std::filesystem;

class GenerateGolden : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() { suite_.run("generate_golden", "generate_reference.py", ""); }
  static void TearDownTestSuite() { suite_.remove(); }
  void SetUp() override { ZERO_GOLDEN_SUITE_READY(suite_); }

  static testing::GoldenSuite suite_;
  MemoryLedger ledger_;
  HostAllocator allocator_{ledger_};
  std::unique_ptr<DeviceContext> context_ = make_cpu_context();
};

testing::GoldenSuite GenerateGolden::suite_;

TEST_P(GenerateGolden, GreedyContinuationAndEachStepsLogitsMatchTransformers) {
  const fs::path folder = suite_.folder / GetParam();
  const GPT2Config config = GPT2Config::load(folder / "config.json");
  const SafetensorsReader reference(folder / "reference.safetensors");
  GPT2Model model(config, allocator_);
  testing::load_reference_params(model, reference);
  const std::vector<int> prompt = testing::read_ids(reference, "prompt");
  const std::vector<int> expected = testing::read_ids(reference, "sequences");
  const int new_tokens = static_cast<int>(expected.size() - prompt.size());
  ASSERT_GT(new_tokens, 0);
  EXPECT_EQ(generate(model, *context_, prompt, new_tokens, {}), expected);

  const std::vector<float> logits = reference.read_float("logits");  // (new_tokens, V)
  ASSERT_EQ(logits.size(), static_cast<std::size_t>(new_tokens) * config.vocab_size);
  Decoder decoder(model, *context_, std::ssize(expected));
  std::vector<float> step = decoder.append(prompt);
  double worst = 0.0;
  for (int i = 0; i < new_tokens; ++i) {
    const float* row = logits.data() + static_cast<std::size_t>(i) * config.vocab_size;
    worst = std::max(worst, testing::relative_error(step.data(), row, step.size()));
    if (i + 1 < new_tokens) step = decoder.append({&expected[prompt.size() + i], 1});
  }
  testing::expect_within("logits of every generated position", worst, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Families, GenerateGolden,
                         ::testing::Values("gpt2", "llama_gqa_llama3_untied",
                                           "llama_biases_head_dim_tied", "mistral_window",
                                           "qwen2_tied", "qwen2_untied"));

}  // namespace
}  // namespace zero::gpt2
