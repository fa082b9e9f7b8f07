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
    folder_ = new fs::path(testing::scratch_dir("llama_family_golden"));
    status_ =
        testing::run_golden_script("llama_family_reference.py", "\"" + folder_->string() + "\"");
  }
  static void TearDownTestSuite() {
    fs::remove_all(*folder_);
    delete folder_;
  }
  void SetUp() override {
    if (status_ == 3 || status_ == 127)
      GTEST_SKIP() << "python3 with torch and transformers is not available (ZERO_PYTHON)";
    ASSERT_EQ(status_, 0) << "tests/golden/llama_family_reference.py failed";
    const fs::path folder = *folder_ / GetParam();
    config_ = GPT2Config::load(folder / "config.json");
    reference_ = std::make_unique<SafetensorsReader>(folder / "reference.safetensors");
    for (std::int64_t token : reference_->read_int("tokens"))
      tokens_.push_back(static_cast<int>(token));
    for (std::int64_t target : reference_->read_int("targets"))
      targets_.push_back(static_cast<int>(target));
    const auto& shape = reference_->tensor("tokens").shape;
    B_ = shape[0];
    T_ = shape[1];
  }

  // A model holding the reference's fp32 parameters, found by their Hugging Face names; the
  // vocabulary's padding rows stay zero.
  std::unique_ptr<GPT2Model> load_model() {
    auto model = std::make_unique<GPT2Model>(config_, allocator_);
    testing::load_reference_params(*model, *reference_);
    return model;
  }

  void expect_reference_grads(const GPT2Model& model, double tolerance) {
    for (int u = 0; u < model.num_units(); ++u)
      for (const TensorSlot& slot : model.grads(u).layout().slots()) {
        const std::string name = hf_tensor_name(model.units()[u], slot.name);
        const std::vector<float> expected = reference_->read_float("grad." + name);
        const float* actual = model.grad_data(u) + slot.offset_elements;
        expect_within("grad " + name, relative_error(actual, expected.data(), expected.size()),
                      tolerance);
        for (std::size_t i = expected.size(); i < slot.num_elements; ++i)
          ASSERT_EQ(actual[i], 0.0f) << name << " padded row element " << i;
      }
  }

  std::vector<float> real_logits(const GPT2Compute& compute) const {
    std::vector<float> logits;
    for (std::int64_t row = 0; row < B_ * T_; ++row) {
      const float* begin = compute.logits() + row * config_.padded_vocab_size();
      logits.insert(logits.end(), begin, begin + config_.vocab_size);
    }
    return logits;
  }

  static fs::path* folder_;
  static int status_;
  GPT2Config config_;
  std::unique_ptr<SafetensorsReader> reference_;
  std::vector<int> tokens_, targets_;
  std::int64_t B_ = 0, T_ = 0;
  MemoryLedger ledger_;
  HostAllocator allocator_{ledger_};
  std::unique_ptr<DeviceContext> context_ = make_cpu_context();
};

fs::path* LlamaFamilyGolden::folder_ = nullptr;
int LlamaFamilyGolden::status_ = 0;

TEST_P(LlamaFamilyGolden, LogitsLossAndGradientsMatchTransformers) {
  auto model = load_model();
  GPT2Compute compute(config_, B_, T_, *context_, allocator_);
  const float loss = model->forward(compute, tokens_, targets_);
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
  GPT2Compute compute(config_, B_, T_, *context_, allocator_, {.activation_checkpointing = true});
  checkpointed->forward(compute, tokens_, targets_);
  checkpointed->backward(compute);
  auto plain = load_model();
  GPT2Compute plain_compute(config_, B_, T_, *context_, allocator_);
  plain->forward(plain_compute, tokens_, targets_);
  plain->backward(plain_compute);
  for (int u = 0; u < plain->num_units(); ++u)
    for (std::size_t i = 0; i < plain->grads(u).layout().num_elements(); ++i)
      ASSERT_EQ(checkpointed->grad_data(u)[i], plain->grad_data(u)[i])
          << plain->units()[u].name << " element " << i;
}

TEST_P(LlamaFamilyGolden, TwentyAdamWStepsFollowTransformers) {
  auto model = load_model();
  GPT2Compute compute(config_, B_, T_, *context_, allocator_);
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
    const float loss = model->forward(compute, tokens_, targets_);
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
