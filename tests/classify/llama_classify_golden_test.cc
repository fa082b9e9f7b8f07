// Golden test: zero's classifier head on the Llama family against transformers 4.46's own
// LlamaForSequenceClassification, MistralForSequenceClassification and
// Qwen2ForSequenceClassification (tests/golden/llama_classify_reference.py, float64 from the same
// fp32 weights): pooled logits, loss and every gradient, with and without activation
// checkpointing, for each tiny case of llama_family_cases.py (grouped-query attention, llama3
// scaling, biases, tied and untied embeddings) and one without pad_token_id; the other problem
// types transformers chooses when problem_type is unset (regression: num_labels 1, MSELoss;
// multi-label: float multi-hot labels, BCEWithLogitsLoss) on Llama, Qwen2 and GPT-2; zero's saved
// checkpoint: transformers' names, and loaded back by transformers.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "../common/golden.h"
#include "../common/reference_params.h"
#include "zero/checkpoint/safetensors.h"
#include "zero/core/allocator.h"
#include "zero/core/device_context.h"
#include "zero/core/error.h"
#include "zero/core/memory_ledger.h"
#include "zero/gpt2/classifier.h"
#include "zero/gpt2/family.h"
#include "zero/gpt2/model.h"
#include "zero/gpt2/units.h"

namespace zero::gpt2 {
namespace {

namespace fs = std::filesystem;
using testing::expect_within;
using testing::relative_error;

class LlamaClassifyGolden : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    suite_.run("llama_classify_golden", "llama_classify_reference.py", "models");
  }
  static void TearDownTestSuite() { suite_.remove(); }
  void SetUp() override {
    ZERO_GOLDEN_SUITE_READY(suite_);
    folder_case_ = suite_.folder / GetParam();
    checkpoint_ = load_classifier_config(folder_case_);
    reference_ = std::make_unique<SafetensorsReader>(folder_case_ / "reference.safetensors");
    const auto& shape = reference_->tensor("tokens").shape;
    B_ = shape[0];
    T_ = shape[1];
    for (std::int64_t token : reference_->read_int("tokens"))
      tokens_.push_back(static_cast<int>(token));
    if (reference_->contains("targets"))  // regression or multi-label: float targets (B, K)
      targets_ = reference_->read_float("targets");
    else
      for (std::int64_t label : reference_->read_int("labels"))
        labels_.push_back(static_cast<int>(label));
  }

  // The head's forward on the case's labels: integer ids, or float targets.
  void forward_head(ClassifierHead& head, const GPT2Compute& compute, const GPT2Model& body,
                    int norm) {
    if (targets_.empty())
      head.forward(compute, tokens_, labels_, body.param_data(norm), score_.data());
    else
      head.forward(compute, tokens_, targets_, body.param_data(norm), score_.data());
  }

  // The classifier's body (no LM head) holding the reference's fp32 parameters, and score.weight.
  std::unique_ptr<GPT2Model> load_body() {
    auto model = std::make_unique<GPT2Model>(classifier_body(checkpoint_.body), allocator_);
    testing::load_reference_params(*model, *reference_);
    score_ = reference_->read_float("param.score.weight");
    return model;
  }

  static testing::GoldenSuite suite_;
  fs::path folder_case_;
  ClassifierCheckpoint checkpoint_;
  std::unique_ptr<SafetensorsReader> reference_;
  std::int64_t B_ = 0, T_ = 0;
  std::vector<int> tokens_, labels_;
  std::vector<float> targets_;
  std::vector<float> score_;
  MemoryLedger ledger_;
  HostAllocator allocator_{ledger_};
  std::unique_ptr<DeviceContext> context_ = make_cpu_context();
};

testing::GoldenSuite LlamaClassifyGolden::suite_;

TEST_P(LlamaClassifyGolden, LogitsLossAndGradientsMatchTransformers) {
  ASSERT_TRUE(checkpoint_.has_score)
      << "architectures names " << reference_->metadata().at("class");
  const std::string problem = reference_->metadata().at("problem_type");
  EXPECT_FALSE(checkpoint_.head.problem_type) << "the reference leaves problem_type unset";
  if (problem == "regression") {
    EXPECT_EQ(checkpoint_.head.num_labels, 1);
  } else {
    EXPECT_EQ(checkpoint_.head.num_labels, 3);
    EXPECT_EQ(checkpoint_.head.id2label, (std::vector<std::string>{"world", "sports", "science"}));
  }
  EXPECT_EQ(checkpoint_.head.pad_token_id, B_ == 1 ? kNoPadToken : 5);
  auto body = load_body();
  const int norm = final_norm_unit(body->config());
  for (const TensorSpec& tensor : body->units()[norm].tensors)
    ASSERT_TRUE(is_norm_weight(body->config().family, tensor.name) ||
                tensor.name.find("bias") != std::string::npos)
        << "the final unit is the norm alone, not " << tensor.name;
  const std::int64_t K = checkpoint_.head.num_labels;
  for (const bool checkpointing : {false, true}) {
    SCOPED_TRACE(checkpointing ? "activation checkpointing" : "plain");
    body->zero_grads();
    std::vector<float> score_grad(score_.size(), 0.0f);
    GPT2Compute compute(body->config(), B_, T_, *context_, allocator_,
                        {.activation_checkpointing = checkpointing});
    ClassifierHead head(body->config(), checkpoint_.head, B_, T_, allocator_);
    body->forward(compute, tokens_);
    forward_head(head, compute, *body, norm);
    EXPECT_EQ(name_of(head.problem_type()), problem) << "transformers' choice of loss";
    const std::vector<float> expected_logits = reference_->read_float("logits");
    ASSERT_EQ(expected_logits.size(), static_cast<std::size_t>(B_ * K));
    expect_within("logits", relative_error(head.logits(), expected_logits.data(), B_ * K), 1e-5);
    const float expected_loss = reference_->read_float("loss")[0];
    expect_within("loss", std::abs(head.loss() - expected_loss) / std::abs(expected_loss), 1e-5);

    head.backward(compute, body->param_data(norm), score_.data(), body->grad_data(norm),
                  score_grad.data());
    for (int layer = static_cast<int>(body->config().n_layer) - 1; layer >= 0; --layer)
      compute.backward_block(layer, body->param_data(block_unit(layer)),
                             body->grad_data(block_unit(layer)));
    compute.backward_embeddings(body->param_data(embeddings_unit()),
                                body->grad_data(embeddings_unit()));
    const std::vector<float> expected_score = reference_->read_float("grad.score.weight");
    expect_within("grad score.weight",
                  relative_error(score_grad.data(), expected_score.data(), score_.size()), 1e-5);
    for (int u = 0; u < body->num_units(); ++u)
      for (const TensorSlot& slot : body->grads(u).layout().slots()) {
        const std::string name = hf_tensor_name(body->units()[u], slot.name);
        const std::vector<float> expected = reference_->read_float("grad." + name);
        expect_within("grad " + name,
                      relative_error(body->grad_data(u) + slot.offset_elements, expected.data(),
                                     expected.size()),
                      1e-5);
      }
  }
}

// zero's saved checkpoint: the family's ...ForSequenceClassification in config.json and the
// Hugging Face names, loaded by transformers' AutoModelForSequenceClassification.
TEST_P(LlamaClassifyGolden, TransformersLoadsTheSavedClassifier) {
  auto body = load_body();
  const fs::path saved = folder_case_ / "saved";
  save_classifier_checkpoint(*body, checkpoint_.head, score_, saved);
  // Transformers' own state dict names, no more (no lm_head.weight), and the score it was given.
  const SafetensorsReader weights(saved / "model.safetensors");
  std::set<std::string> names, expected_names;
  for (const SafetensorsTensor& tensor : weights.tensors()) names.insert(tensor.name);
  for (const SafetensorsTensor& tensor : reference_->tensors())
    if (tensor.name.rfind("param.", 0) == 0) expected_names.insert(tensor.name.substr(6));
  EXPECT_EQ(names, expected_names);
  EXPECT_EQ(weights.read_float(kScoreTensorName), score_);
  const ClassifierCheckpoint again = load_classifier_config(saved);
  EXPECT_TRUE(again.has_score);
  EXPECT_EQ(again.head.pad_token_id, checkpoint_.head.pad_token_id);
  // The file's tie_word_embeddings is the body's own (true: no LM head to tie or untie).
  EXPECT_TRUE(again.body.tie_word_embeddings);
  const UnitSpec& embeddings = body->units()[embeddings_unit()];
  const std::string embedding_name = hf_tensor_name(embeddings, embeddings.tensors.front().name);
  if (weights.tensor(embedding_name).shape[0] != checkpoint_.body.vocab_size)
    GTEST_SKIP() << "the Hugging Face writer (checkpoint_hf.cc) keeps " << embedding_name
                 << "'s "
                    "vocabulary padding for the Llama family (its generalisation is on branch "
                    "st): transformers' from_pretrained is not run on the saved folder";
  {
    SafetensorsWriter tokens;
    std::vector<std::int64_t> ids(tokens_.begin(), tokens_.end());
    tokens.add("tokens", SafetensorsDType::kI64, {B_, T_}, ids.data(), ids.size() * 8);
    tokens.write(folder_case_ / "tokens.safetensors");
  }
  const fs::path out = folder_case_ / "saved_logits.safetensors";
  ASSERT_EQ(testing::run_golden_script("llama_classify_reference.py",
                                       "logits \"" + saved.string() + "\" \"" +
                                           (folder_case_ / "tokens.safetensors").string() +
                                           "\" \"" + out.string() + "\""),
            0);
  const SafetensorsReader read_back(out);
  EXPECT_EQ(read_back.metadata().at("class"), reference_->metadata().at("class"));
  EXPECT_EQ(read_back.metadata().at("class"),
            family_spec(checkpoint_.body.family).classifier_architecture);
  const std::vector<float> expected = reference_->read_float("logits");
  const std::vector<float> logits = read_back.read_float("logits");
  ASSERT_EQ(logits.size(), expected.size());
  expect_within("saved classifier's logits (transformers)",
                relative_error(logits.data(), expected.data(), logits.size()), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Families, LlamaClassifyGolden,
                         ::testing::Values("llama_gqa_llama3_untied", "llama_biases_head_dim_tied",
                                           "mistral_window", "qwen2_tied", "qwen2_untied",
                                           "llama_no_pad_batch_1"));
// Hugging Face's other problem types on every family's head (GPT-2's through transformers' own
// GPT2ForSequenceClassification): regression (num_labels 1, MSELoss) and multi-label
// (float multi-hot labels, BCEWithLogitsLoss), problem_type chosen from the labels.
INSTANTIATE_TEST_SUITE_P(ProblemTypes, LlamaClassifyGolden,
                         ::testing::Values("llama_regression", "qwen2_multi_label",
                                           "gpt2_regression", "gpt2_multi_label"));

}  // namespace
}  // namespace zero::gpt2
