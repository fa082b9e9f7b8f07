// zero train --task text-classification through the library: the same losses and the same test
// report at worlds 1, 2, 4 and stages 0-3, odd split sizes counted once, a saved classifier that
// evaluates to the same numbers, labels as integers, the validation split, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../train/train_test_util.h"
#include "classify_test_util.h"
#include "zero/comm/thread_communicator.h"
#include "zero/train/classification_data.h"
#include "zero/train/trainer.h"

namespace zero::testing {
namespace {

using nlohmann::json;

class ClassifyTrain : public ::testing::Test {
 protected:
  void SetUp() override {
    write_labelled_csv(folder_.path() / "train.csv", 64, 1);
    write_labelled_csv(folder_.path() / "validation.csv", 37, 2);  // odd: 37 = 12·3 + 1
    write_labelled_csv(folder_.path() / "test.csv", 29, 3);
  }
  train::TrainResult run_world(const train::TrainingArguments& arguments, int world) {
    std::vector<train::TrainResult> results(static_cast<std::size_t>(world));
    run_ranks(world, [&](Communicator& comm) {
      results[static_cast<std::size_t>(comm.rank())] =
          train::train(arguments, comm, {.print = false});
    });
    return results[0];
  }
  TempFolder folder_{"classify"};
};

// The same global batch (8) at worlds 1, 2, 4 and ZeRO stages 0-3: the same training losses,
// validation losses and test report; 37 validation and 29 test examples counted once each.
TEST_F(ClassifyTrain, SameLossesAndReportAtEveryWorldSizeAndStage) {
  std::vector<double> reference_losses, reference_eval;
  std::string reference_report;
  std::vector<std::vector<std::int64_t>> reference_confusion;
  for (const int world : {1, 2, 4})
    for (int stage = 0; stage <= 3; ++stage) {
      SCOPED_TRACE("world " + std::to_string(world) + " stage " + std::to_string(stage));
      const fs::path output =
          folder_.path() / ("out_w" + std::to_string(world) + "_s" + std::to_string(stage));
      train::TrainingArguments arguments = classify_arguments(folder_.path(), output);
      arguments.per_device_train_batch_size = 8 / world;
      arguments.deepspeed = write_ds_config(folder_.path(), stage).string();
      const train::TrainResult result = run_world(arguments, world);
      const std::vector<double> losses = logged_losses(result.log_history);
      const std::vector<double> evals = eval_losses(result);
      ASSERT_TRUE(result.test_report.has_value());
      const train::ClassificationReport& report = *result.test_report;
      EXPECT_EQ(report.num_examples, 29);
      std::int64_t in_matrix = 0;
      for (const auto& row : report.confusion)
        for (std::int64_t count : row) in_matrix += count;
      EXPECT_EQ(in_matrix, 29);
      EXPECT_EQ(evals.size(), 2u);  // each epoch's end
      std::ifstream file(output / "test_results.json");
      const json written = json::parse(file);
      EXPECT_EQ(written["classification_report_text"], report.text());
      EXPECT_EQ(written["test_samples"], 29);
      EXPECT_EQ(written["predictions"].size(), 29u);
      if (reference_losses.empty()) {
        reference_losses = losses;
        reference_eval = evals;
        reference_report = report.text();
        reference_confusion = report.confusion;
        continue;
      }
      ASSERT_EQ(losses.size(), reference_losses.size());
      for (std::size_t i = 0; i < losses.size(); ++i)
        EXPECT_NEAR(losses[i], reference_losses[i], 1e-5) << "log entry " << i;
      ASSERT_EQ(evals.size(), reference_eval.size());
      for (std::size_t i = 0; i < evals.size(); ++i)
        EXPECT_NEAR(evals[i], reference_eval[i], 1e-5) << "evaluation " << i;
      EXPECT_EQ(report.text(), reference_report);
      EXPECT_EQ(report.confusion, reference_confusion);
    }
}

// Accumulation (2 micro-batches of 4) and --gradient_checkpointing (world 2, stage 3) keep the
// losses of the plain batch-8 run.
TEST_F(ClassifyTrain, AccumulationAndCheckpointingKeepTheLosses) {
  const train::TrainingArguments plain = classify_arguments(folder_.path(), folder_.path() / "p");
  const std::vector<double> reference = logged_losses(run_world(plain, 1).log_history);
  train::TrainingArguments accumulated = classify_arguments(folder_.path(), folder_.path() / "a");
  accumulated.per_device_train_batch_size = 4;
  accumulated.gradient_accumulation_steps = 2;
  train::TrainingArguments recomputed = classify_arguments(folder_.path(), folder_.path() / "r");
  recomputed.per_device_train_batch_size = 4;
  recomputed.gradient_checkpointing = true;
  recomputed.deepspeed = write_ds_config(folder_.path(), 3).string();
  for (const auto& [name, losses] :
       {std::pair{"accumulation", logged_losses(run_world(accumulated, 1).log_history)},
        std::pair{"checkpointing", logged_losses(run_world(recomputed, 2).log_history)}}) {
    ASSERT_EQ(losses.size(), reference.size()) << name;
    for (std::size_t i = 0; i < losses.size(); ++i)
      EXPECT_NEAR(losses[i], reference[i], 1e-5) << name << " log entry " << i;
  }
}

// bf16 (DeepSpeed's "bf16" section: 16-bit parameters and gradients, fp32 master weights): the
// head widens its 16-bit ln_f and score to fp32 and adds its gradients back with one rounding, as
// the body does. World 1 stage 0 and world 2 stage 3 agree within bf16's gradient rounding (the
// reduce-scatter sums 16-bit gradients in another order), and both stay near the fp32 run.
TEST_F(ClassifyTrain, Bf16TrainsTheHeadToo) {
  auto bf16_config = [&](int stage) {
    const fs::path path = folder_.path() / ("bf16_stage" + std::to_string(stage) + ".json");
    std::ofstream(path) << R"({"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
      "gradient_accumulation_steps": "auto", "gradient_clipping": "auto", "bf16": {"enabled": "auto"},
      "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto",
                                                "weight_decay": "auto"}},
      "zero_optimization": {"stage": )"
                        << stage << R"(, "reduce_bucket_size": 4096,
      "stage3_prefetch_bucket_size": 4096, "stage3_param_persistence_threshold": 0}})";
    return path.string();
  };
  train::TrainingArguments fp32 = classify_arguments(folder_.path(), folder_.path() / "fp32");
  const std::vector<double> reference = logged_losses(run_world(fp32, 1).log_history);
  train::TrainingArguments one = classify_arguments(folder_.path(), folder_.path() / "bf16_1");
  one.bf16 = true;
  one.deepspeed = bf16_config(0);
  train::TrainingArguments two = classify_arguments(folder_.path(), folder_.path() / "bf16_2");
  two.bf16 = true;
  two.deepspeed = bf16_config(3);
  two.per_device_train_batch_size = 4;
  const train::TrainResult first = run_world(one, 1);
  const std::vector<double> losses_one = logged_losses(first.log_history);
  const std::vector<double> losses_two = logged_losses(run_world(two, 2).log_history);
  ASSERT_EQ(losses_one.size(), reference.size());
  ASSERT_EQ(losses_two.size(), reference.size());
  double largest = 0.0, across = 0.0;
  for (std::size_t i = 0; i < reference.size(); ++i) {
    EXPECT_NEAR(losses_two[i], losses_one[i], 1e-2 * losses_one[i]) << "log entry " << i;
    EXPECT_NEAR(losses_one[i], reference[i], 2e-2 * reference[i]) << "log entry " << i;
    largest = std::max(largest, std::abs(losses_one[i] - reference[i]) / reference[i]);
    across = std::max(across, std::abs(losses_two[i] - losses_one[i]) / losses_one[i]);
  }
  std::printf(
      "bf16 vs fp32: largest relative loss difference %.3g over %zu steps; bf16 world 2 "
      "stage 3 vs world 1 stage 0: %.3g\n",
      largest, reference.size(), across);
  EXPECT_GT(largest, 0.0) << "the bf16 run must not be the fp32 run";
  ASSERT_TRUE(first.test_report.has_value());
  EXPECT_EQ(first.test_report->num_examples, 29);
}

// The saved GPT2ForSequenceClassification evaluates (at another world size) to the same
// validation loss and test report; its config carries the labels.
TEST_F(ClassifyTrain, SavedClassifierEvaluatesToTheSameNumbers) {
  const fs::path output = folder_.path() / "trained";
  const train::TrainResult trained = run_world(classify_arguments(folder_.path(), output), 1);
  std::ifstream config_file(output / "config.json");
  const json config = json::parse(config_file);
  EXPECT_EQ(config["architectures"][0], "GPT2ForSequenceClassification");
  EXPECT_EQ(config["id2label"], (json{{"0", "love"}, {"1", "sea"}, {"2", "war"}}));
  train::TrainingArguments evaluate = classify_arguments(folder_.path(), folder_.path() / "again");
  evaluate.model_name_or_path = output.string();
  evaluate.config_overrides.clear();
  evaluate.train_files.clear();
  evaluate.do_train = false;
  const train::TrainResult again = run_world(evaluate, 2);
  ASSERT_TRUE(trained.eval_loss && again.eval_loss);
  EXPECT_NEAR(*again.eval_loss, *trained.eval_loss, 1e-5);
  EXPECT_EQ(again.test_report->text(), trained.test_report->text());

  // Its head has other labels than this data: named, not silently remapped.
  std::ofstream(folder_.path() / "other.csv")
      << "text,label\n\"the sea\",pirates\n\"a ship\",navy\n";
  train::TrainingArguments other = classify_arguments(folder_.path(), folder_.path() / "other");
  other.model_name_or_path = output.string();
  other.config_overrides.clear();
  other.train_files = {(folder_.path() / "other.csv").string()};
  other.validation_files = other.train_files;
  other.do_predict = false;
  try {
    run_world(other, 1);
    ADD_FAILURE() << "a classifier for love/sea/war trained on pirates/navy";
  } catch (const std::exception& error) {  // run_ranks rethrows with the rank prefixed
    EXPECT_NE(std::string(error.what())
                  .find("its classifier's labels (id2label) are not the "
                        "training labels"),
              std::string::npos)
        << error.what();
  }
}

// Integer labels sort numerically (2, 10, 33, not "10" < "2"); no --validation_file: a seeded
// split of the train file (ceil(10% of 64) = 7 examples) validates.
TEST_F(ClassifyTrain, IntegerLabelsAndTheValidationSplit) {
  write_labelled_csv(folder_.path() / "numbers.csv", 64, 1, /*integers=*/true);
  train::TrainingArguments arguments =
      classify_arguments(folder_.path(), folder_.path() / "numbers_out");
  arguments.train_files = {(folder_.path() / "numbers.csv").string()};
  arguments.validation_files.clear();
  arguments.do_predict = false;
  arguments.validation_split_percentage = 10;
  arguments.max_steps = 2;
  run_world(arguments, 2);
  std::ifstream config_file(folder_.path() / "numbers_out" / "config.json");
  const json config = json::parse(config_file);
  EXPECT_EQ(config["id2label"], (json{{"0", "2"}, {"1", "10"}, {"2", "33"}}));
  std::ifstream eval_file(folder_.path() / "numbers_out" / "eval_results.json");
  EXPECT_EQ(json::parse(eval_file)["eval_samples"], 7);
}

TEST_F(ClassifyTrain, BadInputIsNamed) {
  auto message_of = [&](const train::TrainingArguments& arguments) -> std::string {
    try {
      run_world(arguments, 1);
    } catch (const train::InputError& error) {
      return error.what();
    } catch (const std::exception& error) {
      return std::string("not an InputError: ") + error.what();
    }
    return "no error";
  };
  const fs::path output = folder_.path() / "bad";
  {
    std::ofstream(folder_.path() / "unknown.csv") << "text,label\n\"the sea\",pirates\n";
    train::TrainingArguments arguments = classify_arguments(folder_.path(), output);
    arguments.test_files = {(folder_.path() / "unknown.csv").string()};
    EXPECT_NE(message_of(arguments).find("has label 'pirates', not one of the training labels"),
              std::string::npos);
  }
  {  // a float label column is regression (run_classification's), so a class is not a number
    std::ofstream(folder_.path() / "scores.csv") << "text,label\n\"the sea\",1\n\"a ship\",2.5\n";
    train::TrainingArguments arguments = classify_arguments(folder_.path(), output);
    arguments.train_files = {(folder_.path() / "scores.csv").string()};
    arguments.validation_files = arguments.train_files;
    arguments.test_files = {(folder_.path() / "unknown.csv").string()};
    EXPECT_NE(message_of(arguments).find("example 1 has label 'pirates', a string where "
                                         "regression (a float label column, or --do_regression) "
                                         "takes numbers"),
              std::string::npos)
        << message_of(arguments);
  }
  {  // a regression target beyond fp32 (1e999 overflows to inf) is refused, not trained on
    std::ofstream(folder_.path() / "huge.csv") << "text,label\n\"the sea\",1.5\n\"a ship\",1e999\n";
    train::TrainingArguments arguments = classify_arguments(folder_.path(), output);
    arguments.train_files = {(folder_.path() / "huge.csv").string()};
    arguments.validation_files = arguments.train_files;
    arguments.test_files = arguments.train_files;
    EXPECT_NE(
        message_of(arguments).find("example 2 has label '1e999', which is not a finite float"),
        std::string::npos)
        << message_of(arguments);
  }
  {
    train::TrainingArguments arguments = classify_arguments(folder_.path(), output);
    arguments.label_column_name = "category";
    EXPECT_NE(message_of(arguments).find("no column 'category' (--label_column_name)"),
              std::string::npos);
  }
  {
    train::TrainingArguments arguments = classify_arguments(folder_.path(), output);
    arguments.test_files.clear();
    EXPECT_NE(message_of(arguments).find("--do_predict needs --test_file"), std::string::npos);
  }
  {
    train::TrainingArguments arguments = classify_arguments(folder_.path(), output);
    arguments.max_seq_length = 17;
    EXPECT_NE(message_of(arguments).find("--max_seq_length 17 is larger than the model's"),
              std::string::npos);
  }
  EXPECT_FALSE(fs::exists(output)) << "bad input must not create output_dir";
}

TEST(ClassificationData, JsonLinesLabelsAndPadding) {
  TempFolder folder("classify_jsonl");
  std::ofstream(folder.path() / "data.jsonl")
      << "{\"sentence\": \"one\", \"label\": 1}\n\n{\"sentence\": \"two\", \"label\": 0}\n";
  const std::vector<train::LabelledText> examples =
      train::read_labelled_file(folder.path() / "data.jsonl", {"sentence"}, " ", "label");
  ASSERT_EQ(examples.size(), 2u);
  EXPECT_EQ(examples[0].label, "1");
  EXPECT_EQ(train::label_list(examples), (std::vector<std::string>{"0", "1"}));
  // Each bad line is named file:line (blank lines count).
  auto error_of = [&](const std::string& content) {
    std::ofstream(folder.path() / "bad.jsonl") << content;
    try {
      train::read_labelled_file(folder.path() / "bad.jsonl", {"sentence"}, " ", "label");
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  const std::string good = "{\"sentence\": \"one\", \"label\": 1}\n\n";
  EXPECT_NE(error_of(good + "{\"sentence\": \"one\", \"label\": {\"a\": 1}}\n")
                .find("bad.jsonl:3: label {\"a\":1} is neither a non-empty string, a number nor a "
                      "list"),
            std::string::npos);
  EXPECT_NE(error_of(good + "{\"sentence\": \"one\", \"label\": \"one\"}\n")
                .find("bad.jsonl:3: label \"one\" is a string, the file's first label '1' a "
                      "integer"),
            std::string::npos);
  // Integers beside floats are floats (pyarrow's column type); lists are lists.
  std::ofstream(folder.path() / "kinds.jsonl")
      << "{\"sentence\": \"a\", \"label\": 1}\n{\"sentence\": \"b\", \"label\": 0.5}\n";
  const auto floats =
      train::read_labelled_file(folder.path() / "kinds.jsonl", {"sentence"}, " ", "label");
  EXPECT_TRUE(floats[0].kind == train::LabelKind::kFloat && floats[1].label == "0.5");
  EXPECT_EQ(train::problem_type_of(floats, std::nullopt), gpt2::ProblemType::kRegression);
  EXPECT_EQ(train::problem_type_of(floats, false), gpt2::ProblemType::kSingleLabel);
  std::ofstream(folder.path() / "lists.jsonl")
      << "{\"sentence\": \"a\", \"label\": [\"x\", 3]}\n{\"sentence\": \"b\", \"label\": []}\n";
  const auto lists =
      train::read_labelled_file(folder.path() / "lists.jsonl", {"sentence"}, " ", "label");
  EXPECT_EQ(lists[0].classes, (std::vector<std::string>{"x", "3"}));
  EXPECT_EQ(train::problem_type_of(lists, std::nullopt), gpt2::ProblemType::kMultiLabel);
  EXPECT_EQ(train::label_list(lists, gpt2::ProblemType::kMultiLabel),
            (std::vector<std::string>{"3", "x"}));
  EXPECT_NE(error_of(good + "{\"sentence\": \"x\"\n").find("bad.jsonl:3: not a JSON object"),
            std::string::npos);
  EXPECT_NE(error_of(good + "[1, 2]\n").find("bad.jsonl:3: not a JSON object"), std::string::npos);
  EXPECT_NE(error_of(good + "{\"text\": \"x\", \"label\": 1}\n")
                .find("bad.jsonl:3: no string 'sentence' (--text_column_names)"),
            std::string::npos);
  EXPECT_NE(error_of(good + "{\"sentence\": \"x\"}\n").find("bad.jsonl:3: no 'label'"),
            std::string::npos);
  train::ClassificationDataset data;
  data.seq_len = 2;
  data.tokens = {5, 6, 7, 9};
  data.labels = {1, 0};
  std::vector<int> tokens, labels;
  const std::vector<std::size_t> rows = {1};
  train::fill_classification_batch(data, rows, 2, 9, tokens, labels);
  EXPECT_EQ(tokens, (std::vector<int>{7, 9, 9, 9}));
  EXPECT_EQ(labels, (std::vector<int>{0, -100}));
}

}  // namespace
}  // namespace zero::testing
