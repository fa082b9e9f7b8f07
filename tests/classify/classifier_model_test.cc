// The classification head: pooled positions (with and without a pad token), logits against GPT-2's
// tied LM path, gradients against finite differences, checkpoints (round trip, an LM checkpoint as
// the body, bad input), the Llama family's body without an LM head. The Llama family's numbers
// against transformers: llama_classify_golden_test.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../common/test_data.h"
#include "../common/tiny_gpt2.h"
#include "zero/core/allocator.h"
#include "zero/core/device_context.h"
#include "zero/core/error.h"
#include "zero/core/memory_ledger.h"
#include "zero/gpt2/checkpoint_hf.h"
#include "zero/gpt2/classifier.h"
#include "zero/gpt2/family.h"
#include "zero/gpt2/model.h"

namespace zero::gpt2 {
namespace {

namespace fs = std::filesystem;

// The tiny GPT-2 without dropout, the last token id (60) ending and starting texts.
GPT2Config classifier_config() {
  GPT2Config config =
      tiny_config({.vocab_size = 61, .n_positions = 16, .n_embd = 32, .n_layer = 2, .n_head = 4});
  config.resid_pdrop = config.embd_pdrop = config.attn_pdrop = 0.0;
  config.eos_token_id = config.bos_token_id = 60;
  return config;
}

TEST(ClassifierHead, LastTokenPositionsFollowHuggingFace) {
  // pad 9: rows end at their last non-pad token; all pads: 0; a pad inside the text is skipped.
  const std::vector<int> tokens = {1, 2, 9, 9, 9, 9, 9, 9, 4, 9, 5, 9, 1, 2, 3, 4};
  EXPECT_EQ(last_token_positions(tokens, 4, 4, 9), (std::vector<std::int64_t>{1, 0, 2, 3}));
  // No pad token (Hugging Face's None): the last token, pads or not.
  EXPECT_EQ(last_token_positions(tokens, 4, 4, kNoPadToken),
            (std::vector<std::int64_t>{3, 3, 3, 3}));
}

// A tiny untied Llama: its classifier's body drops lm_head.weight (the final unit is norm.weight),
// and a batch of more than one row needs a pad token, as in Hugging Face.
TEST(ClassifierHead, ALlamaBodyHasNoLmHeadAndNeedsAPadTokenForBatches) {
  GPT2Config llama = family_defaults(ModelFamily::kLlama);
  llama.apply_overrides(
      "vocab_size=50,hidden_size=16,num_hidden_layers=1,num_attention_heads=4,"
      "num_key_value_heads=2,intermediate_size=24,max_position_embeddings=16,"
      "tie_word_embeddings=false");
  const GPT2Config body = classifier_body(llama);
  const std::vector<UnitSpec> units = gpt2_units(body);
  ASSERT_EQ(units.back().tensors.size(), 1u);
  EXPECT_EQ(hf_tensor_name(units.back(), units.back().tensors[0].name), "model.norm.weight");
  MemoryLedger ledger;
  HostAllocator allocator(ledger);
  ClassifierConfig head;
  head.num_labels = 2;
  head.pad_token_id = kNoPadToken;
  EXPECT_NO_THROW(ClassifierHead(body, head, 1, 8, allocator));
  try {
    ClassifierHead(body, head, 2, 8, allocator);
    FAIL() << "a batch of 2 rows without a pad token was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("no pad_token_id"), std::string::npos) << error.what();
  }
  // The untied LM's own body is refused by the checkpoint writer, naming what it holds.
  GPT2Model lm(llama, allocator);
  const std::vector<float> score(static_cast<std::size_t>(2 * 16));
  const fs::path folder = testing::scratch_dir("classifier_llama_lm_body");
  try {
    save_classifier_checkpoint(lm, head, score, folder);
    FAIL() << "an untied LM body was saved as a classifier";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("lm_head.weight"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("LlamaForSequenceClassification"), std::string::npos)
        << error.what();
  }
  fs::remove_all(folder);
}

class ClassifierModel : public ::testing::Test {
 protected:
  void SetUp() override {
    body_.init(5);
    score_.resize(static_cast<std::size_t>(K_ * config_.n_embd));
    init_score_range(config_, 5, {0, score_.size()}, score_.data());
    head_config_.num_labels = K_;
    head_config_.pad_token_id = 60;
    head_config_.id2label = {"science", "politics", "computers"};
  }
  // Mean loss of the head over tokens_/labels_ with the current parameters.
  float loss() {
    GPT2Compute compute(config_, B_, T_, *context_, allocator_);
    ClassifierHead head(config_, head_config_, B_, T_, allocator_);
    body_.forward(compute, tokens_);
    head.forward(compute, tokens_, labels_, body_.param_data(final_norm_unit(config_)),
                 score_.data());
    return head.loss();
  }

  GPT2Config config_ = classifier_config();
  MemoryLedger ledger_;
  HostAllocator allocator_{ledger_};
  std::unique_ptr<DeviceContext> context_ = make_cpu_context();
  GPT2Model body_{config_, allocator_};
  const std::int64_t K_ = 3, B_ = 3, T_ = 6;
  std::vector<float> score_;
  ClassifierConfig head_config_;
  std::vector<int> tokens_ = {3, 7, 11, 60, 60, 60, 5, 9, 13, 17, 21, 25, 8, 60, 60, 60, 60, 60};
  std::vector<int> labels_ = {2, 0, 1};
};

// With score.weight = wte's first K rows, the head's logits are the LM logits at the rows' last
// tokens (the tied head computes ln_f · wteᵀ at every position).
TEST_F(ClassifierModel, LogitsEqualTheLanguageModelsAtTheLastToken) {
  std::copy(body_.param_data(embeddings_unit()),
            body_.param_data(embeddings_unit()) + score_.size(), score_.begin());
  GPT2Compute compute(config_, B_, T_, *context_, allocator_);
  ClassifierHead head(config_, head_config_, B_, T_, allocator_);
  body_.forward(compute, tokens_);
  head.forward(compute, tokens_, std::span<const int>{}, body_.param_data(final_norm_unit(config_)),
               score_.data());
  const std::vector<std::int64_t> last = {2, 5, 0};
  EXPECT_EQ(head.positions(), last);
  for (std::int64_t b = 0; b < B_; ++b)
    for (std::int64_t k = 0; k < K_; ++k)
      EXPECT_NEAR(head.logits()[b * K_ + k],
                  compute.logits()[(b * T_ + last[b]) * config_.padded_vocab_size() + k], 1e-5)
          << "row " << b << " class " << k;
  EXPECT_EQ(head.num_counted(), 0);
}

// Backward against central differences of the loss (fp32: a 1e-2 relative bound) on elements of
// score, ln_f, the last and the first block, and the embeddings (wte of a used token, wpe).
TEST_F(ClassifierModel, GradientsMatchFiniteDifferences) {
  GPT2Compute compute(config_, B_, T_, *context_, allocator_);
  ClassifierHead head(config_, head_config_, B_, T_, allocator_);
  std::vector<float> score_grad(score_.size(), 0.0f);
  body_.zero_grads();
  body_.forward(compute, tokens_);
  const int norm = final_norm_unit(config_);
  head.forward(compute, tokens_, labels_, body_.param_data(norm), score_.data());
  head.backward(compute, body_.param_data(norm), score_.data(), body_.grad_data(norm),
                score_grad.data());
  for (int layer = 1; layer >= 0; --layer)
    compute.backward_block(layer, body_.param_data(block_unit(layer)),
                           body_.grad_data(block_unit(layer)));
  compute.backward_embeddings(body_.param_data(embeddings_unit()),
                              body_.grad_data(embeddings_unit()));
  auto check = [&](const std::string& what, float* parameter, float analytic) {
    const float saved = *parameter, step = 1e-2f;
    *parameter = saved + step;
    const double up = loss();
    *parameter = saved - step;
    const double down = loss();
    *parameter = saved;
    const double numeric = (up - down) / (2.0 * step);
    EXPECT_NEAR(analytic, numeric, 1e-2 * std::max(1e-2, std::abs(numeric))) << what;
  };
  for (std::size_t i : {0ul, 33ul, 95ul}) check("score", &score_[i], score_grad[i]);
  for (std::size_t i : {1ul, 40ul})
    check("ln_f", body_.param_data(norm) + i, body_.grad_data(norm)[i]);
  for (int layer : {0, 1})
    for (std::size_t i : {5ul, 200ul, 3000ul})
      check("block", body_.param_data(block_unit(layer)) + i,
            body_.grad_data(block_unit(layer))[i]);
  const std::size_t wte_token_7 = 7 * 32 + 3, wpe_2 = 64 * 32 + 2 * 32 + 1;
  for (std::size_t i : {wte_token_7, wpe_2})
    check("embeddings", body_.param_data(embeddings_unit()) + i,
          body_.grad_data(embeddings_unit())[i]);
}

TEST_F(ClassifierModel, IgnoredLabelsAndOutOfRangeLabels) {
  GPT2Compute compute(config_, B_, T_, *context_, allocator_);
  ClassifierHead head(config_, head_config_, B_, T_, allocator_);
  body_.forward(compute, tokens_);
  const float* norm = body_.param_data(final_norm_unit(config_));
  head.forward(compute, tokens_, std::vector<int>{2, -100, 1}, norm, score_.data());
  EXPECT_EQ(head.num_counted(), 2);
  EXPECT_THROW(head.forward(compute, tokens_, std::vector<int>{2, 3, 1}, norm, score_.data()),
               Error);
  EXPECT_THROW(head.forward(compute, tokens_, std::vector<int>{2, 1}, norm, score_.data()), Error);
}

TEST_F(ClassifierModel, InitialisationIsShardingIndependent) {
  std::vector<float> pieces(score_.size());
  init_score_range(config_, 5, {0, 40}, pieces.data());
  init_score_range(config_, 5, {40, pieces.size()}, pieces.data() + 40);
  EXPECT_EQ(pieces, score_);
  double sum = 0.0, squares = 0.0;
  for (float value : score_) {
    sum += value;
    squares += static_cast<double>(value) * value;
  }
  const double n = static_cast<double>(score_.size());
  EXPECT_NEAR(std::sqrt(squares / n - (sum / n) * (sum / n)), config_.initializer_range, 0.005);
}

TEST_F(ClassifierModel, CheckpointRoundTripAndAnLmCheckpointAsTheBody) {
  const fs::path folder = testing::scratch_dir("classifier_checkpoint");
  save_classifier_checkpoint(body_, head_config_, score_, folder / "classifier");
  std::ifstream config_file(folder / "classifier" / "config.json");
  const nlohmann::json json = nlohmann::json::parse(config_file);
  EXPECT_EQ(json["architectures"][0], "GPT2ForSequenceClassification");
  EXPECT_EQ(json["id2label"]["1"], "politics");
  EXPECT_EQ(json["label2id"]["computers"], 2);
  EXPECT_EQ(json["num_labels"], 3);
  EXPECT_EQ(json["pad_token_id"], 60);

  const ClassifierCheckpoint read = load_classifier_config(folder / "classifier");
  EXPECT_TRUE(read.has_score);
  EXPECT_EQ(read.head.id2label, head_config_.id2label);
  GPT2Model body(read.body, allocator_);
  std::vector<float> score(score_.size());
  ASSERT_TRUE(load_classifier_weights(body, score, 3, folder / "classifier"));
  EXPECT_EQ(score, score_);
  for (int u = 0; u < body.num_units(); ++u)
    EXPECT_EQ(0, std::memcmp(body.param_data(u), body_.param_data(u),
                             body.units()[u].num_elements() * sizeof(float)));

  // An LM checkpoint: the body loads, score does not (the caller keeps its initialisation).
  save_hf_checkpoint(body_, folder / "lm");
  const ClassifierCheckpoint lm = load_classifier_config(folder / "lm");
  EXPECT_FALSE(lm.has_score);
  // No pad_token_id in the file: none, as Hugging Face reads it (the trainer pads with eos).
  EXPECT_EQ(lm.head.pad_token_id, kNoPadToken);
  GPT2Model lm_body(lm.body, allocator_);
  std::vector<float> untouched(score_.size(), 7.0f);
  EXPECT_FALSE(load_classifier_weights(lm_body, untouched, 3, folder / "lm"));
  EXPECT_EQ(untouched, std::vector<float>(score_.size(), 7.0f));

  // A head of another size: the shape is named.
  std::vector<float> wrong(static_cast<std::size_t>(4 * config_.n_embd));
  try {
    load_classifier_weights(body, wrong, 4, folder / "classifier");
    FAIL() << "a (3, 32) score.weight loaded as (4, 32)";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("'score.weight' has shape (3, 32)"), std::string::npos)
        << error.what();
  }
  fs::remove_all(folder);
}

// config.json's problem_type: written as set (null when unset), read back, and a value
// transformers does not know named.
TEST_F(ClassifierModel, ProblemTypeRoundTripsAndAnUnknownOneIsNamed) {
  const fs::path folder = testing::scratch_dir("classifier_problem_type");
  auto problem_type_in = [&](const fs::path& saved) {
    std::ifstream config_file(saved / "config.json");
    return nlohmann::json::parse(config_file)["problem_type"];
  };
  ClassifierConfig head = head_config_;
  save_classifier_checkpoint(body_, head, score_, folder / "unset");
  EXPECT_TRUE(problem_type_in(folder / "unset").is_null());
  EXPECT_FALSE(load_classifier_config(folder / "unset").head.problem_type);
  head.problem_type = ProblemType::kMultiLabel;
  save_classifier_checkpoint(body_, head, score_, folder / "multi");
  EXPECT_EQ(problem_type_in(folder / "multi"), "multi_label_classification");
  EXPECT_EQ(load_classifier_config(folder / "multi").head.problem_type, ProblemType::kMultiLabel);
  EXPECT_EQ(resolved_problem_type(head, /*integer_labels=*/true), ProblemType::kMultiLabel);
  head.problem_type.reset();
  EXPECT_EQ(resolved_problem_type(head, true), ProblemType::kSingleLabel);
  EXPECT_EQ(resolved_problem_type(head, false), ProblemType::kMultiLabel);
  head.num_labels = 1;
  EXPECT_EQ(resolved_problem_type(head, true), ProblemType::kRegression);

  std::ifstream in(folder / "multi" / "config.json");
  nlohmann::json json = nlohmann::json::parse(in);
  json["problem_type"] = "regresion";
  std::ofstream(folder / "multi" / "config.json") << json.dump();
  try {
    load_classifier_config(folder / "multi");
    FAIL() << "problem_type 'regresion' was read";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("problem_type \"regresion\" is not regression"),
              std::string::npos)
        << error.what();
  }
  fs::remove_all(folder);
}

// Float targets need a problem type that takes them, integer labels one that takes ids.
TEST_F(ClassifierModel, LabelsOfTheWrongKindForTheProblemTypeAreRefused) {
  GPT2Compute compute(config_, B_, T_, *context_, allocator_);
  body_.forward(compute, tokens_);
  const ConstUnitData norm = body_.param_data(final_norm_unit(config_));
  ClassifierConfig head = head_config_;
  head.problem_type = ProblemType::kSingleLabel;
  ClassifierHead single(config_, head, B_, T_, allocator_);
  const std::vector<float> targets(static_cast<std::size_t>(B_ * head.num_labels), 1.0f);
  EXPECT_THROW(single.forward(compute, tokens_, targets, norm, score_.data()), Error);
  head.problem_type = ProblemType::kRegression;
  ClassifierHead regression(config_, head, B_, T_, allocator_);
  EXPECT_THROW(regression.forward(compute, tokens_, labels_, norm, score_.data()), Error);
  regression.forward(compute, tokens_, targets, norm, score_.data());
  EXPECT_EQ(regression.problem_type(), ProblemType::kRegression);
  EXPECT_GT(regression.loss(), 0.0f);
}

}  // namespace
}  // namespace zero::gpt2
