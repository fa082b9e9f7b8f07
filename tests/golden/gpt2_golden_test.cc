// Golden test: zero's GPT-2 against the PyTorch reference (tests/golden/gpt2_reference.py):
// logits, loss, every gradient, 10 AdamW steps, and our checkpoint read back by the script.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "../common/golden.h"
#include "../common/reference_params.h"
#include "../common/test_data.h"
#include "zero/checkpoint/safetensors.h"
#include "zero/core/allocator.h"
#include "zero/core/device_context.h"
#include "zero/core/memory_ledger.h"
#include "zero/gpt2/checkpoint_hf.h"
#include "zero/gpt2/model.h"
#include "zero/optim/kernels.h"

namespace zero::gpt2 {
namespace {

namespace fs = std::filesystem;

// tests/golden's reference script for this test; its exit code (3: torch missing, 127: no python).
int run_reference(const std::string& arguments) {
  return testing::run_golden_script("gpt2_reference.py", arguments);
}
using testing::expect_within;
using testing::relative_error;

class GPT2Golden : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    suite_.run("gpt2_golden", "gpt2_reference.py", "reference --out");
  }
  static void TearDownTestSuite() { suite_.remove(); }
  void SetUp() override {
    ZERO_GOLDEN_SUITE_READY(suite_);
    reference_ = std::make_unique<SafetensorsReader>(suite_.folder / "reference.safetensors");
    batch_ = testing::read_reference_batch(*reference_);
  }

  void expect_reference_grads(const GPT2Model& model, double tolerance) {
    testing::expect_reference_grads(model, *reference_, tolerance);
  }
  std::vector<float> real_logits(const GPT2Compute& compute, const GPT2Config& config) const {
    return testing::real_logits(compute, config, batch_.B * batch_.T);
  }

  static testing::GoldenSuite suite_;
  std::unique_ptr<SafetensorsReader> reference_;
  testing::ReferenceBatch batch_;
  MemoryLedger ledger_;
  HostAllocator allocator_{ledger_};
  std::unique_ptr<DeviceContext> context_ = make_cpu_context();
};

testing::GoldenSuite GPT2Golden::suite_;

TEST_F(GPT2Golden, LogitsLossAndGradientsMatchPyTorch) {
  GPT2Model model = load_hf_model(suite_.folder / "model", allocator_);
  GPT2Compute compute(model.config(), batch_.B, batch_.T, *context_, allocator_);
  const float loss = model.forward(compute, batch_.tokens, batch_.targets);
  const std::vector<float> logits = real_logits(compute, model.config());
  const std::vector<float> expected_logits = reference_->read_float("logits");
  ASSERT_EQ(logits.size(), expected_logits.size());
  expect_within("logits", relative_error(logits.data(), expected_logits.data(), logits.size()),
                1e-5);
  const float expected_loss = reference_->read_float("loss")[0];
  expect_within("loss", std::abs(loss - expected_loss) / std::abs(expected_loss), 1e-5);

  model.backward(compute);
  expect_reference_grads(model, 1e-4);
}

TEST_F(GPT2Golden, ActivationCheckpointingGivesTheSameGradients) {
  GPT2Model model = load_hf_model(suite_.folder / "model", allocator_);
  GPT2Compute compute(model.config(), batch_.B, batch_.T, *context_, allocator_,
                      {.activation_checkpointing = true});
  model.forward(compute, batch_.tokens, batch_.targets);
  model.backward(compute);
  expect_reference_grads(model, 1e-4);

  GPT2Model plain = load_hf_model(suite_.folder / "model", allocator_);
  GPT2Compute plain_compute(plain.config(), batch_.B, batch_.T, *context_, allocator_);
  plain.forward(plain_compute, batch_.tokens, batch_.targets);
  plain.backward(plain_compute);
  for (int u = 0; u < model.num_units(); ++u)
    for (std::size_t i = 0; i < model.grads(u).layout().num_elements(); ++i)
      ASSERT_EQ(model.grad_data(u)[i], plain.grad_data(u)[i])
          << model.units()[u].name << " element " << i;

  const ActivationPlan full = GPT2Compute::plan(model.config(), batch_.B, batch_.T);
  const ActivationPlan checkpointed =
      GPT2Compute::plan(model.config(), batch_.B, batch_.T, {.activation_checkpointing = true});
  EXPECT_LT(checkpointed.total_bytes(), full.total_bytes());
  EXPECT_GT(checkpointed.recompute_bytes, 0u);
}

TEST_F(GPT2Golden, TenAdamWStepsFollowPyTorch) {
  GPT2Model model = load_hf_model(suite_.folder / "model", allocator_);
  GPT2Compute compute(model.config(), batch_.B, batch_.T, *context_, allocator_);
  const auto& metadata = reference_->metadata();
  // zero::optim's AdamW kernel (the one the engine runs) against torch.optim.AdamW.
  optim::AdamHyperparams hyper;
  hyper.lr = std::stod(metadata.at("lr"));
  hyper.beta1 = std::stod(metadata.at("beta1"));
  hyper.beta2 = std::stod(metadata.at("beta2"));
  hyper.eps = std::stod(metadata.at("eps"));
  hyper.weight_decay = std::stod(metadata.at("weight_decay"));
  hyper.adam_w_mode = true;
  std::vector<std::vector<float>> m, v;
  for (int u = 0; u < model.num_units(); ++u) {
    m.emplace_back(model.params(u).layout().num_elements(), 0.0f);
    v.emplace_back(model.params(u).layout().num_elements(), 0.0f);
  }
  const std::vector<float> expected = reference_->read_float("adamw_losses");
  for (std::size_t step = 0; step < expected.size(); ++step) {
    model.zero_grads();
    const float loss = model.forward(compute, batch_.tokens, batch_.targets);
    model.backward(compute);
    expect_within("AdamW loss at step " + std::to_string(step),
                  std::abs(loss - expected[step]) / std::abs(expected[step]), 1e-5);
    for (int u = 0; u < model.num_units(); ++u) {
      hyper.step = static_cast<std::int64_t>(step) + 1;
      optim::adam_step(model.param_data(u), model.grad_data(u), m[u].data(), v[u].data(),
                       m[u].size(), hyper);
    }
  }
  EXPECT_LT(expected.back(), expected.front());
}

TEST_F(GPT2Golden, OurCheckpointLoadsInPyTorchToTheSameLogits) {
  GPT2Model model = load_hf_model(suite_.folder / "model", allocator_);
  GPT2Compute compute(model.config(), batch_.B, batch_.T, *context_, allocator_);
  model.forward(compute, batch_.tokens, batch_.targets);
  const std::vector<float> logits = real_logits(compute, model.config());

  const fs::path ours = suite_.folder / "ours";
  save_hf_checkpoint(model, ours, {.max_shard_bytes = 64 * 1024});  // sharded, with the index
  ASSERT_TRUE(fs::exists(ours / "model.safetensors.index.json"));
  const fs::path tokens_file = suite_.folder / "tokens.safetensors";
  SafetensorsWriter tokens;
  std::vector<std::int64_t> wide(batch_.tokens.begin(), batch_.tokens.end());
  tokens.add("tokens", SafetensorsDType::kI64, {batch_.B, batch_.T}, wide.data(), wide.size() * 8);
  tokens.write(tokens_file);
  const fs::path out = suite_.folder / "python_logits.safetensors";
  ASSERT_EQ(run_reference("logits --model \"" + ours.string() + "\" --tokens \"" +
                          tokens_file.string() + "\" --out \"" + out.string() + "\""),
            0);
  const std::vector<float> python_logits = SafetensorsReader(out).read_float("logits");
  ASSERT_EQ(python_logits.size(), logits.size());
  expect_within("logits of our checkpoint in PyTorch",
                relative_error(logits.data(), python_logits.data(), logits.size()), 1e-5);
}

}  // namespace
}  // namespace zero::gpt2
