// The planner on the Llama family (configs/models): the engine holds exactly the model's tensors
// (issue 38's count, no more than the units' padding), the activation rows follow the family's
// widths (grouped-query k/v, SwiGLU's 2H gate/up and H product, RMSNorm's one statistic, RoPE's
// table), a sliding window shorter than the block is refused naming it.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "zero/core/error.h"
#include "zero/gpt2/compute.h"
#include "zero/gpt2/config.h"
#include "zero/gpt2/family.h"
#include "zero/train/input_error.h"
#include "zero/train/plan.h"

namespace zero::train {
namespace {

std::string model_folder(const std::string& name) {
  const char* source = std::getenv("ZERO_SOURCE_DIR");
  if (source == nullptr) ADD_FAILURE() << "ZERO_SOURCE_DIR is not set (run through ctest)";
  return (std::filesystem::path(source != nullptr ? source : ".") / "configs" / "models" / name)
      .string();
}

TrainingArguments arguments_of(const std::string& model, std::int64_t block_size) {
  TrainingArguments arguments;
  arguments.model_name_or_path = model_folder(model);
  arguments.output_dir = ::testing::TempDir() + "model_family_plan";  // a plan writes nothing
  arguments.train_files = {::testing::TempDir() + "corpus.txt"};      // nor reads data
  arguments.block_size = block_size;
  arguments.per_device_train_batch_size = 1;
  arguments.do_train = true;
  arguments.bf16 = true;
  return arguments;
}

constexpr const char* kZero3 =
    R"({"train_micro_batch_size_per_gpu": "auto", "bf16": {"enabled": "auto"},
        "zero_optimization": {"stage": 3}})";

// Each unit is padded to a multiple of N x 16 elements (docs/planner.md): L + 2 units.
TEST(ModelFamilyPlan, TheEngineHoldsExactlyTheModelsTensors) {
  const std::pair<const char*, std::int64_t> models[] = {{"Llama-2-7b-hf", 6'738'415'616},
                                                         {"Qwen2.5-7B", 7'615'616'512}};
  for (const auto& [name, parameters] : models) {
    const PlanSetup setup = plan_setup(arguments_of(name, 512), 8, kZero3);
    const RankPlan plan = plan_rank(setup, 8, 0);
    EXPECT_EQ(plan.parameters, parameters) << name;
    const std::int64_t units = setup.model->n_layer + 2;
    const std::int64_t vocabulary_padding =
        (setup.model->padded_vocab_size() - setup.model->vocab_size) * setup.model->n_embd * 2;
    EXPECT_GE(plan.padded_parameters, parameters + vocabulary_padding) << name;
    EXPECT_LT(plan.padded_parameters, parameters + vocabulary_padding + units * 8 * 16) << name;
    // bf16 parameters and gradients, fp32 master and Adam's two moments: 2 + 4 + 4 + 8 bytes.
    EXPECT_EQ(plan.model_states.total(), plan.padded_parameters / 8 * 18) << name;
  }
}

// The CPU kernels' attention keeps one log-sum-exp per head and row (NH = 8 per row, in 16
// floats) and takes no scratch (kernels.h, attention_layout); everything fp32 with fp32
// parameters.
TEST(ModelFamilyPlan, ActivationRowsFollowTheFamilysWidths) {
  gpt2::GPT2Config config = gpt2::family_defaults(gpt2::ModelFamily::kLlama);
  config.apply_overrides(
      "vocab_size=300,hidden_size=64,num_hidden_layers=3,num_attention_heads=8,"
      "num_key_value_heads=2,intermediate_size=96,max_position_embeddings=64");
  const std::int64_t B = 2, T = 16, N = B * T, C = 64, NH = 8, KVH = 2, HS = 8, H = 96;
  const std::int64_t qkv = (NH + 2 * KVH) * HS;
  const gpt2::ActivationPlan plan =
      gpt2::GPT2Compute::plan(config, B, T, {.device = DeviceKind::kCpu});
  ASSERT_EQ(plan.kept_bytes.size(), 5u);
  EXPECT_EQ(plan.kept_bytes[0], 4u * N * C);  // the embedded tokens
  // RMSNorm's output and rstd twice, q/k/v, the log-sum-exps, the attention's output, the
  // residual, SwiGLU's gate and up (2H) and their product (H), the block's output.
  const std::int64_t block = C + 1 + qkv + 16 + NH * HS + C + C + 1 + 2 * H + H + C;
  for (int layer = 1; layer <= 3; ++layer) EXPECT_EQ(plan.kept_bytes[layer], 4u * N * block);
  // The head: the final RMSNorm's output and rstd, the padded logits, the losses and logsumexp.
  EXPECT_EQ(plan.kept_bytes[4], 4u * N * (C + 1 + 384 + 1 + 1));
  EXPECT_EQ(plan.recompute_bytes, 0u);
  // proj, dresidual, dproj, d(gate, up), dln, datty, dqkv, SwiGLU's output gradient, RoPE's table,
  // grouped-query attention's NH heads of q, k and v and their gradient, and the CPU attention's
  // blocks of scores: three (T, T) fp32 blocks a thread (rows of 16 floats), 64 bytes to align.
  const std::int64_t attention_blocks = omp_get_max_threads() * 3 * 4 * T * T + 64;
  EXPECT_EQ(plan.workspace_bytes, 4u * (N * (C + C + C + 2 * H + C + NH * HS + qkv) + N * H +
                                        T * HS + 2 * N * 3 * NH * HS) +
                                      attention_blocks);
  // Gradient checkpointing keeps each block's output and one shared set of its internals.
  const gpt2::ActivationPlan checkpointed = gpt2::GPT2Compute::plan(
      config, B, T, {.activation_checkpointing = true, .device = DeviceKind::kCpu});
  EXPECT_EQ(checkpointed.kept_bytes[2], 4u * N * C);
  EXPECT_EQ(checkpointed.recompute_bytes, 4u * N * (block - C));
}

TEST(ModelFamilyPlan, ASlidingWindowShorterThanTheBlockIsRefusedNamingIt) {
  EXPECT_NO_THROW(planned_from_flags(arguments_of("Mistral-7B-v0.1", 4096)));
  try {
    planned_from_flags(arguments_of("Mistral-7B-v0.1", 8192));
    FAIL() << "a block of 8192 tokens over Mistral's window of 4096 was planned";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what())
                  .find("sliding_window 4096 is shorter than the sequence "
                        "length 8192"),
              std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace zero::train
