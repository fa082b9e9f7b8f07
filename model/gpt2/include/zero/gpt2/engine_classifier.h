// EngineClassifier: a ...ForSequenceClassification (GPT-2, Llama, Mistral, Qwen2) driven by
// zero::Engine, one rank's share: the decoder's units plus the head's "score" unit, a training
// micro-step and an evaluation forward.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "zero/core/allocator.h"
#include "zero/engine/engine.h"
#include "zero/gpt2/classifier.h"
#include "zero/gpt2/compute.h"
#include "zero/gpt2/config.h"
#include "zero/gpt2/units.h"

namespace zero::gpt2 {

// As EngineModel (engine_model.h): every rank, same config and seed, same point relative to other
// registrations. Registers gpt2_units(classifier_body(config)) (no LM head) then "score"
// (score.weight (K, C), initialised by init_score_range), initialises the engine, allocates one
// micro-batch (rows, seq_len) of body and head activations from `activations`.
class EngineClassifier {
 public:
  EngineClassifier(Engine& engine, const GPT2Config& config, const ClassifierConfig& head,
                   std::int64_t rows, std::int64_t seq_len, std::uint64_t seed,
                   Allocator& activations, ComputeOptions options = {});
  EngineClassifier(const EngineClassifier&) = delete;
  EngineClassifier& operator=(const EngineClassifier&) = delete;

  // Forward and backward of one micro-batch: tokens (B, T), labels (B) (negative: ignored);
  // returns the mean loss over counted rows. Gathers embeddings, the blocks, the final norm + score
  // (forward, loss and backward of the head under one gather), the blocks in reverse, embeddings;
  // reduces score, the final norm, the blocks in reverse, embeddings. The gradient written is
  // d(micro-batch mean loss)/dθ × engine.loss_scale(). The caller calls engine.step(). All ranks.
  double train_micro_step(std::span<const int> tokens, std::span<const int> labels,
                          DropoutKey dropout);
  // The same with float targets (B, K) of a regression or multi-label head (ClassifierHead).
  double train_micro_step(std::span<const int> tokens, std::span<const float> targets,
                          DropoutKey dropout);
  // Forward only (no dropout, gradients or reductions); labels may be empty (no loss). Returns
  // the mean loss over counted rows; logits() and predictions() hold the rows' outputs. All ranks.
  double evaluate(std::span<const int> tokens, std::span<const int> labels);
  double evaluate(std::span<const int> tokens, std::span<const float> targets);

  std::int64_t num_counted() const { return head_.num_counted(); }
  const float* logits() const { return head_.logits(); }  // (B, K)
  std::vector<int> predictions() const { return head_.predictions(); }

  // The engine's unit ids: gpt2_units(config()) in order, then score (last).
  const std::vector<UnitId>& units() const { return units_; }
  const std::vector<UnitSpec>& unit_specs() const { return specs_; }  // the body's
  UnitId score_unit() const { return units_.back(); }
  const GPT2Config& config() const { return config_; }  // classifier_body's
  const ClassifierConfig& head_config() const { return head_config_; }
  Engine& engine() { return engine_; }

 private:
  static std::vector<UnitId> register_units(Engine& engine, const GPT2Config& config,
                                            const ClassifierConfig& head,
                                            const std::vector<UnitSpec>& specs, std::uint64_t seed);
  void forward_body();
  template <typename Labels>
  double train_step(std::span<const int> tokens, Labels labels, DropoutKey dropout);
  template <typename Labels>
  double evaluate_labels(std::span<const int> tokens, Labels labels);

  Engine& engine_;
  GPT2Config config_;
  ClassifierConfig head_config_;
  std::vector<UnitSpec> specs_;
  std::vector<UnitId> units_;
  GPT2Compute compute_;
  ClassifierHead head_;
};

}  // namespace zero::gpt2
