// classification_report against values computed by hand, and its text layout.
#include "zero/train/classification_metrics.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "zero/core/error.h"

namespace zero::train {
namespace {

// y_true 0 1 2 2 1, y_pred 0 2 2 2 0: class a tp 1 fp 1 fn 0; bb tp 0 fp 0 fn 2 (never
// predicted); c tp 2 fp 1 fn 0.
TEST(ClassificationReport, HandComputedValues) {
  const std::vector<int> y_true = {0, 1, 2, 2, 1}, y_pred = {0, 2, 2, 2, 0};
  const ClassificationReport report = classification_report(y_true, y_pred, {"a", "bb", "c"});
  EXPECT_DOUBLE_EQ(report.classes[0].precision, 0.5);
  EXPECT_DOUBLE_EQ(report.classes[0].recall, 1.0);
  EXPECT_DOUBLE_EQ(report.classes[0].f1, 2.0 / 3.0);
  EXPECT_EQ(report.classes[0].support, 1);
  EXPECT_DOUBLE_EQ(report.classes[1].precision, 0.0);  // never predicted: zero_division = 0
  EXPECT_DOUBLE_EQ(report.classes[1].recall, 0.0);
  EXPECT_DOUBLE_EQ(report.classes[1].f1, 0.0);
  EXPECT_EQ(report.classes[1].support, 2);
  EXPECT_DOUBLE_EQ(report.classes[2].precision, 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(report.classes[2].recall, 1.0);
  EXPECT_DOUBLE_EQ(report.classes[2].f1, 0.8);
  EXPECT_DOUBLE_EQ(report.accuracy, 0.6);
  EXPECT_NEAR(report.macro.precision, (0.5 + 0.0 + 2.0 / 3.0) / 3.0, 1e-15);
  EXPECT_NEAR(report.macro.recall, 2.0 / 3.0, 1e-15);
  EXPECT_NEAR(report.macro.f1, (2.0 / 3.0 + 0.8) / 3.0, 1e-15);
  EXPECT_NEAR(report.weighted.precision, (0.5 * 1 + 2.0 / 3.0 * 2) / 5.0, 1e-15);
  EXPECT_NEAR(report.weighted.recall, 0.6, 1e-15);
  EXPECT_NEAR(report.weighted.f1, (2.0 / 3.0 + 0.8 * 2) / 5.0, 1e-15);
  EXPECT_EQ(report.macro.support, 5);
  EXPECT_EQ(report.confusion,
            (std::vector<std::vector<std::int64_t>>{{1, 0, 0}, {1, 0, 1}, {0, 0, 2}}));
  // scikit-learn's layout: names right-aligned to max(longest name, len("weighted avg")).
  EXPECT_EQ(report.text(),
            "              precision    recall  f1-score   support\n"
            "\n"
            "           a       0.50      1.00      0.67         1\n"
            "          bb       0.00      0.00      0.00         2\n"
            "           c       0.67      1.00      0.80         2\n"
            "\n"
            "    accuracy                           0.60         5\n"
            "   macro avg       0.39      0.67      0.49         5\n"
            "weighted avg       0.37      0.60      0.45         5\n");
  EXPECT_EQ(report.confusion_text(),
            "true \\ predicted     a    bb     c\n"
            "               a     1     0     0\n"
            "              bb     1     0     1\n"
            "               c     0     0     2\n");
  const nlohmann::json json = nlohmann::json::parse(report.to_json_text());
  EXPECT_DOUBLE_EQ(json["c"]["f1-score"].get<double>(), 0.8);
  EXPECT_EQ(json["bb"]["support"].get<int>(), 2);
  EXPECT_DOUBLE_EQ(json["accuracy"].get<double>(), 0.6);
}

TEST(ClassificationReport, LongNamesWidenTheColumnAndDigitsApply) {
  const ClassificationReport report = classification_report(
      std::vector<int>{0, 1}, std::vector<int>{0, 0}, {"a-very-long-class-name", "b"});
  const std::string text = report.text(3);
  EXPECT_NE(text.find("a-very-long-class-name      0.500     1.000     0.667         1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("              accuracy                          0.500         2\n"),
            std::string::npos)
      << text;
}

TEST(ClassificationReport, BadInputIsNamed) {
  EXPECT_THROW(
      {
        try {
          classification_report(std::vector<int>{0, 3}, std::vector<int>{0, 1}, {"a", "b"});
        } catch (const Error& error) {
          EXPECT_NE(std::string(error.what()).find("true label 3 of example 1"), std::string::npos);
          throw;
        }
      },
      Error);
  EXPECT_THROW(classification_report(std::vector<int>{0}, std::vector<int>{0, 1}, {"a", "b"}),
               Error);
}

// Two examples of three classes: logits > 0 predict (1, 0, 1) and (0, 0, 1) against (1, 1, 0)
// and (0, 0, 1): TP 2 (a, c), FP 1 (c of the first), FN 1 (b): 2·2 / (2·2 + 1 + 1).
TEST(MultiLabelF1, MicroAveragesOverEveryExampleAndClass) {
  const std::vector<float> logits = {0.3f, -1.0f, 2.0f, -0.1f, 0.0f, 0.5f};
  const std::vector<float> targets = {1, 1, 0, 0, 0, 1};
  EXPECT_DOUBLE_EQ(multi_label_micro_f1(logits, targets), 4.0 / 6.0);
  EXPECT_DOUBLE_EQ(multi_label_micro_f1(std::vector<float>{-1.0f}, std::vector<float>{0}), 0.0);
  EXPECT_THROW(multi_label_micro_f1(logits, std::vector<float>{1}), Error);
}

TEST(MeanSquaredError, IsTheMeanOfSquaredDifferences) {
  const std::vector<float> predictions = {0.5f, -1.0f, 2.0f}, targets = {1.0f, 1.0f, 2.0f};
  EXPECT_DOUBLE_EQ(mean_squared_error(predictions, targets), (0.25 + 4.0) / 3.0);
  EXPECT_THROW(mean_squared_error(predictions, std::vector<float>{1.0f}), Error);
}

}  // namespace
}  // namespace zero::train
