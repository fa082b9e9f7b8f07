// Golden test: zero's decoder on the Llama family against transformers 4.46's own LlamaForCausalLM,
// MistralForCausalLM and Qwen2ForCausalLM (tests/golden/llama_family_reference.py, float64 from
// the same fp32 weights): logits, loss, every gradient, with and without activation
// checkpointing, and 20 AdamW steps, for each tiny case (grouped-query attention, llama3 scaling,
// Llama's biases and head_dim, Mistral, Qwen2's q/k/v biases, tied and untied heads).
#include <gtest/gtest.h>

#include <cmath>
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
#include "zero/gpt2/model.h"
#include "zero/gpt2/units.h"
#include "zero/optim/kernels.h"

namespace zero::gpt2 {
namespace {

namespace fs = std::filesystem;
using testing::expect_within;
using testing::relative_error;

class LlamaFamilyGolden : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    suite_.run("llama_family_golden", "llama_family_reference.py", "");
  }
  static void TearDownTestSuite() { suite_.remove(); }
  void SetUp() override {
    ZERO_GOLDEN_SUITE_READY(suite_);
    const fs::path folder = suite_.folder / GetParam();
    config_ = GPT2Config::load(folder / "config.json");
    reference_ = std::make_unique<SafetensorsReader>(folder / "reference.safetensors");
    batch_ = testing::read_reference_batch(*reference_);
  }

  // A model holding the reference's fp32 parameters, found by their Hugging Face names; the
  // vocabulary's padding rows stay zero.
  std::unique_ptr<GPT2Model> load_model() {
    auto model = std::make_unique<GPT2Model>(config_, allocator_);
    testing::load_reference_params(*model, *reference_);
    return model;
  }

  void expect_reference_grads(const GPT2Model& model, double tolerance) {
    testing::expect_reference_grads(model, *reference_, tolerance);
  }
  std::vector<float> real_logits(const GPT2Compute& compute) const {
    return testing::real_logits(compute, config_, batch_.B * batch_.T);
  }

  static testing::GoldenSuite suite_;
  GPT2Config config_;
  std::unique_ptr<SafetensorsReader> reference_;
  testing::ReferenceBatch batch_;
  MemoryLedger ledger_;
  HostAllocator allocator_{ledger_};
  std::unique_ptr<DeviceContext> context_ = make_cpu_context();
};

testing::GoldenSuite LlamaFamilyGolden::suite_;

TEST_P(LlamaFamilyGolden, LogitsLossAndGradientsMatchTransformers) {
  auto model = load_model();
  GPT2Compute compute(config_, batch_.B, batch_.T, *context_, allocator_);
  const float loss = model->forward(compute, batch_.tokens, batch_.targets);
  const std::vector<float> logits = real_logits(compute);
  const std::vector<float> expected_logits = reference_->read_float("logits");
  ASSERT_EQ(logits.size(), expected_logits.size());
  expect_within("logits", relative_error(logits.data(), expected_logits.data(), logits.size()),
                1e-5);
  const float expected_loss = reference_->read_float("loss")[0];
  expect_within("loss", std::abs(loss - expected_loss) / std::abs(expected_loss), 1e-5);
  model->backward(compute);
  expect_reference_grads(*model, 1e-4);
}

TEST_P(LlamaFamilyGolden, ActivationCheckpointingGivesTheSameGradients) {
  auto checkpointed = load_model();
  GPT2Compute compute(config_, batch_.B, batch_.T, *context_, allocator_,
                      {.activation_checkpointing = true});
  checkpointed->forward(compute, batch_.tokens, batch_.targets);
  checkpointed->backward(compute);
  auto plain = load_model();
  GPT2Compute plain_compute(config_, batch_.B, batch_.T, *context_, allocator_);
  plain->forward(plain_compute, batch_.tokens, batch_.targets);
  plain->backward(plain_compute);
  for (int u = 0; u < plain->num_units(); ++u)
    for (std::size_t i = 0; i < plain->grads(u).layout().num_elements(); ++i)
      ASSERT_EQ(checkpointed->grad_data(u)[i], plain->grad_data(u)[i])
          << plain->units()[u].name << " element " << i;
}

TEST_P(LlamaFamilyGolden, TwentyAdamWStepsFollowTransformers) {
  auto model = load_model();
  GPT2Compute compute(config_, batch_.B, batch_.T, *context_, allocator_);
  const auto& metadata = reference_->metadata();
  optim::AdamHyperparams hyper;  // zero::optim's AdamW (the engine's) against torch.optim.AdamW
  hyper.lr = std::stod(metadata.at("lr"));
  hyper.beta1 = std::stod(metadata.at("beta1"));
  hyper.beta2 = std::stod(metadata.at("beta2"));
  hyper.eps = std::stod(metadata.at("eps"));
  hyper.weight_decay = std::stod(metadata.at("weight_decay"));
  hyper.adam_w_mode = true;
  std::vector<std::vector<float>> m, v;
  for (int u = 0; u < model->num_units(); ++u) {
    m.emplace_back(model->params(u).layout().num_elements(), 0.0f);
    v.emplace_back(model->params(u).layout().num_elements(), 0.0f);
  }
  const std::vector<float> expected = reference_->read_float("adamw_losses");
  ASSERT_EQ(expected.size(), 20u);
  for (std::size_t step = 0; step < expected.size(); ++step) {
    model->zero_grads();
    const float loss = model->forward(compute, batch_.tokens, batch_.targets);
    model->backward(compute);
    expect_within("AdamW loss at step " + std::to_string(step),
                  std::abs(loss - expected[step]) / std::abs(expected[step]), 1e-5);
    hyper.step = static_cast<std::int64_t>(step) + 1;
    for (int u = 0; u < model->num_units(); ++u)
      optim::adam_step(model->param_data(u), model->grad_data(u), m[u].data(), v[u].data(),
                       m[u].size(), hyper);
  }
  EXPECT_LT(expected.back(), expected.front());
}

INSTANTIATE_TEST_SUITE_P(Families, LlamaFamilyGolden,
                         ::testing::Values("llama_gqa_llama3_untied", "llama_biases_head_dim_tied",
                                           "mistral_window", "qwen2_tied", "qwen2_untied"));

}  // namespace
}  // namespace zero::gpt2
