// The text-classification task (internal to zero::train): run_classification's
// ...ForSequenceClassification on padded examples, with the config's problem_type (single-label,
// regression or multi-label); validated at every epoch's end (and as --eval_strategy asks) by
// loss and the problem's metric (accuracy, mse or micro F1), an epoch line with the epoch's
// training loss (and single-label's accuracy), and with --do_predict the test split's
// predictions (single-label: scikit-learn's report).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "kind/task_kind.h"
#include "prepare/prepare.h"
#include "task/task.h"
#include "zero/gpt2/engine_classifier.h"
#include "zero/train/classification_data.h"

namespace zero::train::detail {

class ClassificationTask final : public Task {
 public:
  explicit ClassificationTask(const TaskContext& context);

  void print_task() const override;
  void print_data() const override;
  bool evaluates_every_epoch() const override { return true; }
  std::string_view model_class() const override;

  void next_train_batch(text::DistributedSampler& sampler, MicroBatch& batch) override;
  // Also counts the training forward's correct predictions (dropout on) into the epoch's.
  double train_micro_step(const MicroBatch& batch, const gpt2::DropoutKey& dropout,
                          TrainerProgress& progress) override;
  // At an epoch's end and the last step: the epoch's line (mean training loss and accuracy over
  // its steps, all ranks' rows; the validation of this step when it ran); resets the epoch.
  std::optional<LogEntry> end_step(std::int64_t step, const LogEntry* evaluation,
                                   TrainerProgress& progress) override;

  Evaluation evaluate(std::int64_t step) override;
  nlohmann::json predict(TrainResult& result) override;

  void save_model(const std::filesystem::path& folder, DType dtype) override;
  void load_model(const std::filesystem::path& folder) override;

 private:
  // The first `count` examples of `data`, evaluated (all ranks): global batches of eval_B × W,
  // rank r rows [first + r·eval_B, first + (r+1)·eval_B) in micro-batches of B, the rows past
  // `count` padded and ignored, so every example counts exactly once whatever the world size.
  struct Outcome {
    double loss = 0.0;
    double metric = 0.0;           // classification_metric_key's: accuracy, mse or micro F1
    std::vector<float> logits;     // (count, K): every example's, on every rank, in example order
    std::vector<int> predictions;  // single-label: argmax of each example's logits
    double seconds = 0.0;
  };
  Outcome evaluate_split(const ClassificationDataset& data, std::size_t count, const char* what);
  // One micro-batch's forward with its labels (or float targets); the mean loss over its rows.
  double evaluate_rows(const ClassificationDataset& data, std::span<const std::size_t> rows);
  // The test split's regression values or multi-label classes, with its metric.
  nlohmann::json float_predictions(const Outcome& test) const;
  // The entry's field of this problem's metric (eval_accuracy, eval_mse or eval_f1).
  std::optional<double>& metric_of(LogEntry& entry) const;
  const std::optional<double>& metric_of(const LogEntry& entry) const {
    return metric_of(const_cast<LogEntry&>(entry));
  }
  bool float_targets() const { return problem_ != gpt2::ProblemType::kSingleLabel; }

  TaskContext context_;
  PretrainedLoad pretrained_load_;  // --model_name_or_path's tensors not used and not given
  std::int64_t B_ = 0;
  int pad_id_ = 0;
  gpt2::ProblemType problem_;
  std::string metric_key_;  // eval_accuracy, eval_mse or eval_f1
  std::vector<int> tokens_, labels_;
  std::vector<float> targets_;
  gpt2::EngineClassifier model_;
};

}  // namespace zero::train::detail
