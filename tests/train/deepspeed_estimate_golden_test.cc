// zero estimate --deepspeed_compat against DeepSpeed itself: tests/golden/
// deepspeed_estimate_reference.py runs deepspeed 0.19's estimate_zero2/3_model_states_mem_needs_
// all_cold under ZERO_PYTHON for a grid of (params, largest layer, GPUs per node, nodes) and the
// printed text must be equal, byte for byte. Skips when ZERO_PYTHON or deepspeed is missing.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../common/golden.h"
#include "zero/gpt2/config.h"
#include "zero/gpt2/family.h"
#include "zero/train/plan.h"

namespace zero::testing {
namespace {

struct Case {
  double total_params, largest_layer_params;
  int gpus_per_node, nodes;
};

TEST(DeepSpeedEstimateGolden, TextEqualsDeepSpeedsOwnOutput) {
  std::vector<Case> grid = {{7e9, 131072000, 8, 1}, {124439808, 38597376, 1, 1},
                            {1.3e9, 1e8, 4, 1},     {6.7e9, 2.6e8, 8, 2},
                            {13e9, 2.6e8, 8, 4},    {70e9, 1e9, 8, 8},
                            {175e9, 2.4e9, 16, 64}, {3e6, 1e6, 2, 3},
                            {405e9, 3.2e9, 8, 16},  {1.5e9, 7.7e7, 3, 5},
                            {999999, 1, 1, 1}};
  // What `zero estimate --deepspeed_compat` passes for the real Llama-family configs
  // (configs/models; their counts are model_family_test's, their largest layers the golden one's).
  const char* source = std::getenv("ZERO_SOURCE_DIR");
  for (const char* model : {"Llama-2-7b-hf", "Qwen2.5-7B", "Llama-3.1-70B"}) {
    if (source == nullptr) break;
    const gpt2::GPT2Config config = gpt2::GPT2Config::load(
        std::filesystem::path(source) / "configs" / "models" / model / "config.json");
    grid.push_back({static_cast<double>(config.num_parameters()),
                    static_cast<double>(gpt2::largest_module_parameters(config)), 8, 4});
  }
  const std::string out = ::testing::TempDir() + "deepspeed_estimate_reference.txt";
  std::ostringstream arguments;
  arguments.precision(17);
  arguments << "\"" << out << "\"";
  for (const Case& c : grid)
    arguments << " " << c.total_params << " " << c.largest_layer_params << " " << c.gpus_per_node
              << " " << c.nodes;
  const int code = run_golden_script("deepspeed_estimate_reference.py", arguments.str());
  if (code == 3) GTEST_SKIP() << "ZERO_PYTHON or deepspeed is not available";
  ASSERT_EQ(code, 0) << "the reference script failed";
  std::ifstream in(out);
  std::stringstream text;
  text << in.rdbuf();
  std::string expected;
  for (const Case& c : grid) {
    expected += train::deepspeed_zero2_text(c.total_params, c.gpus_per_node, c.nodes) + "--end--\n";
    expected += train::deepspeed_zero3_text(c.total_params, c.largest_layer_params, c.gpus_per_node,
                                            c.nodes) +
                "--end--\n";
  }
  EXPECT_EQ(text.str(), expected);
  std::printf("%zu cases, %zu bytes of DeepSpeed's output compared\n", grid.size(),
              text.str().size());
}

}  // namespace
}  // namespace zero::testing
