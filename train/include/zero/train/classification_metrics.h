// Classification metrics as scikit-learn computes and prints them: per-class precision, recall,
// F1 and support, accuracy, macro and weighted averages (classification_report with
// labels = 0..K-1, zero_division = 0) and the confusion matrix (rows true, columns predicted).
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <vector>

namespace zero::train {

struct ClassMetrics {
  double precision = 0.0;  // tp / (tp + fp); 0 when the class was never predicted
  double recall = 0.0;     // tp / (tp + fn); 0 when the class has no true example
  double f1 = 0.0;         // 2 tp / (2 tp + fp + fn); 0 when that is 0 / 0
  std::int64_t support = 0;
};

struct ClassificationReport {
  std::vector<std::string> labels;  // K names in id order
  std::vector<ClassMetrics> classes;
  double accuracy = 0.0;  // (micro average: with every label listed, sklearn prints it so)
  ClassMetrics macro;     // unweighted mean over the K classes
  ClassMetrics weighted;  // support-weighted mean (0 when there is no example)
  std::vector<std::vector<std::int64_t>> confusion;  // (K, K): [true][predicted]
  std::int64_t num_examples = 0;

  // sklearn.metrics.classification_report(..., digits=digits) text, byte for byte.
  std::string text(int digits = 2) const;
  // The confusion matrix as a table: a header row of predicted labels, one row per true label.
  std::string confusion_text() const;
  // JSON text in classification_report(..., output_dict=True)'s layout: {"<label>":
  // {"precision", "recall", "f1-score", "support"}, ..., "accuracy", "macro avg",
  // "weighted avg"}.
  std::string to_json_text() const;
};

// y_true and y_pred: ids in [0, K), same length. Throws zero::Error for an id out of range or a
// length mismatch.
ClassificationReport classification_report(std::span<const int> y_true, std::span<const int> y_pred,
                                           const std::vector<std::string>& labels);

// run_classification's regression metric, evaluate's "mse" (scikit-learn's mean_squared_error):
// the mean of (prediction - target)² over the examples (and outputs), accumulated in double.
// Throws zero::Error for a length mismatch.
double mean_squared_error(std::span<const float> predictions, std::span<const float> targets);

// run_classification's multi-label metric, evaluate's "f1" with config "multilabel" and average
// "micro": logits > 0 are the predicted classes (sigmoid > 0.5), targets 0 or 1; 2·TP / (2·TP +
// FP + FN) over every (example, class), 0 when there is no positive at all (zero_division).
double multi_label_micro_f1(std::span<const float> logits, std::span<const float> targets);

}  // namespace zero::train
