// Classification metrics and scikit-learn's classification_report text.
#include "zero/train/classification_metrics.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "zero/core/error.h"

namespace zero::train {
namespace {

std::string right(const std::string& text, std::size_t width) {
  return text.size() >= width ? text : std::string(width - text.size(), ' ') + text;
}

std::string fixed(double value, int digits) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", digits, value);
  return text;
}

// row_fmt = "{:>{width}s} " + " {:>9.{digits}f}" * 3 + " {:>9}\n"
std::string metrics_row(const std::string& name, const ClassMetrics& m, std::size_t width,
                        int digits) {
  std::string row = right(name, width) + " ";
  for (double value : {m.precision, m.recall, m.f1}) row += " " + right(fixed(value, digits), 9);
  return row + " " + right(std::to_string(m.support), 9) + "\n";
}

double ratio(std::int64_t numerator, std::int64_t denominator) {
  return denominator > 0 ? static_cast<double>(numerator) / static_cast<double>(denominator) : 0.0;
}

nlohmann::ordered_json metrics_json(const ClassMetrics& m) {
  return {
      {"precision", m.precision}, {"recall", m.recall}, {"f1-score", m.f1}, {"support", m.support}};
}

}  // namespace

ClassificationReport classification_report(std::span<const int> y_true, std::span<const int> y_pred,
                                           const std::vector<std::string>& labels) {
  const std::size_t K = labels.size();
  ZERO_CHECK(K > 0, "classification report: no labels");
  ZERO_CHECK(y_true.size() == y_pred.size(), "classification report: ", y_true.size(),
             " true labels but ", y_pred.size(), " predictions");
  ClassificationReport report;
  report.labels = labels;
  report.num_examples = static_cast<std::int64_t>(y_true.size());
  report.confusion.assign(K, std::vector<std::int64_t>(K, 0));
  std::int64_t correct = 0;
  for (std::size_t i = 0; i < y_true.size(); ++i) {
    ZERO_CHECK(y_true[i] >= 0 && static_cast<std::size_t>(y_true[i]) < K,
               "classification report: true label ", y_true[i], " of example ", i,
               " is outside [0, ", K, ")");
    ZERO_CHECK(y_pred[i] >= 0 && static_cast<std::size_t>(y_pred[i]) < K,
               "classification report: prediction ", y_pred[i], " of example ", i,
               " is outside [0, ", K, ")");
    ++report.confusion[static_cast<std::size_t>(y_true[i])][static_cast<std::size_t>(y_pred[i])];
    correct += y_true[i] == y_pred[i];
  }
  report.accuracy = ratio(correct, report.num_examples);
  report.classes.resize(K);
  for (std::size_t k = 0; k < K; ++k) {
    std::int64_t predicted = 0, actual = 0;
    for (std::size_t j = 0; j < K; ++j) {
      predicted += report.confusion[j][k];
      actual += report.confusion[k][j];
    }
    const std::int64_t tp = report.confusion[k][k];
    ClassMetrics& m = report.classes[k];
    m.precision = ratio(tp, predicted);
    m.recall = ratio(tp, actual);
    m.f1 = ratio(2 * tp, predicted + actual);  // 2tp + fp + fn
    m.support = actual;
  }
  for (const ClassMetrics& m : report.classes) {
    report.macro.precision += m.precision / static_cast<double>(K);
    report.macro.recall += m.recall / static_cast<double>(K);
    report.macro.f1 += m.f1 / static_cast<double>(K);
    const double weight = ratio(m.support, report.num_examples);
    report.weighted.precision += m.precision * weight;
    report.weighted.recall += m.recall * weight;
    report.weighted.f1 += m.f1 * weight;
  }
  report.macro.support = report.weighted.support = report.num_examples;
  return report;
}

std::string ClassificationReport::text(int digits) const {
  // sklearn: width = max(longest label, len("weighted avg"), digits)
  std::size_t width = std::string("weighted avg").size();
  for (const std::string& label : labels) width = std::max(width, label.size());
  width = std::max(width, static_cast<std::size_t>(digits));
  std::string out = right("", width) + " ";
  for (const char* header : {"precision", "recall", "f1-score", "support"})
    out += " " + right(header, 9);
  out += "\n\n";
  for (std::size_t k = 0; k < labels.size(); ++k)
    out += metrics_row(labels[k], classes[k], width, digits);
  out += "\n";
  // The accuracy row leaves precision and recall blank ("{:>9.{digits}}" of "").
  out += right("accuracy", width) + " " + " " + std::string(9, ' ') + " " + std::string(9, ' ') +
         " " + right(fixed(accuracy, digits), 9) + " " + right(std::to_string(num_examples), 9) +
         "\n";
  out += metrics_row("macro avg", macro, width, digits);
  out += metrics_row("weighted avg", weighted, width, digits);
  return out;
}

std::string ClassificationReport::confusion_text() const {
  std::size_t width = std::string("true \\ predicted").size();
  for (const std::string& label : labels) width = std::max(width, label.size());
  std::size_t cell = 5;
  for (const std::string& label : labels) cell = std::max(cell, label.size());
  for (const auto& row : confusion)
    for (std::int64_t count : row) cell = std::max(cell, std::to_string(count).size());
  std::string out = right("true \\ predicted", width);
  for (const std::string& label : labels) out += " " + right(label, cell);
  out += "\n";
  for (std::size_t k = 0; k < labels.size(); ++k) {
    out += right(labels[k], width);
    for (std::int64_t count : confusion[k]) out += " " + right(std::to_string(count), cell);
    out += "\n";
  }
  return out;
}

std::string ClassificationReport::to_json_text() const {
  nlohmann::ordered_json json = nlohmann::ordered_json::object();
  for (std::size_t k = 0; k < labels.size(); ++k) json[labels[k]] = metrics_json(classes[k]);
  json["accuracy"] = accuracy;
  json["macro avg"] = metrics_json(macro);
  json["weighted avg"] = metrics_json(weighted);
  return json.dump();
}

double mean_squared_error(std::span<const float> predictions, std::span<const float> targets) {
  ZERO_CHECK(predictions.size() == targets.size(), "mean squared error: ", predictions.size(),
             " predictions but ", targets.size(), " targets");
  double sum = 0.0;
  for (std::size_t i = 0; i < predictions.size(); ++i) {
    const double difference = static_cast<double>(predictions[i]) - targets[i];
    sum += difference * difference;
  }
  return predictions.empty() ? 0.0 : sum / static_cast<double>(predictions.size());
}

double multi_label_micro_f1(std::span<const float> logits, std::span<const float> targets) {
  ZERO_CHECK(logits.size() == targets.size(), "multi-label F1: ", logits.size(), " logits but ",
             targets.size(), " targets");
  std::int64_t true_positives = 0, false_positives = 0, false_negatives = 0;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const bool predicted = logits[i] > 0.0f, actual = targets[i] > 0.5f;
    true_positives += predicted && actual;
    false_positives += predicted && !actual;
    false_negatives += !predicted && actual;
  }
  return ratio(2 * true_positives, 2 * true_positives + false_positives + false_negatives);
}

}  // namespace zero::train
