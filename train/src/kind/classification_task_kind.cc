// The text-classification task before its model exists (task_kind.h): run_classification's flags,
// its labelled examples by split, the classifier head (labels and pad id, from the checkpoint when
// it has one), the encoded splits, and the ClassificationTask that trains them.
#include <algorithm>
#include <optional>
#include <string>

#include "config/input_checks.h"
#include "kind/prepared.h"
#include "kind/task_kind.h"
#include "zero/core/error.h"
#include "zero/gpt2/classifier.h"
#include "zero/train/classification_metrics.h"

namespace zero::train::detail {
namespace {

// Labelled examples by split, read before the tokenizer that may learn on them; the validation
// split taken from the train examples when none is given.
TaskSources read_labelled_splits(const TrainingArguments& arguments, const DataFiles& files) {
  const std::vector<std::string> text_columns = split_files({arguments.text_column_names});
  auto read_all = [&](const std::vector<std::string>& paths, const char* flag) {
    std::vector<LabelledText> examples;
    for (const std::string& file : paths)
      for (LabelledText& example : as_input_error(flag, [&] {
             return read_labelled_file(file, text_columns, arguments.text_column_delimiter,
                                       arguments.label_column_name);
           }))
        examples.push_back(std::move(example));
    return examples;
  };
  TaskSources labelled;
  labelled.train = read_all(files.train, "--train_file");
  labelled.validation = read_all(files.validation, "--validation_file");
  if (arguments.do_predict) labelled.test = read_all(files.test, "--test_file");
  if (labelled.validation.empty() && arguments.do_eval) {
    if (labelled.train.empty()) input_error("--do_eval needs --validation_file or --train_file");
    as_input_error("validation split", [&] {
      split_validation(labelled.train, labelled.validation, arguments.validation_split_percentage,
                       arguments.seed);
    });
  }
  return labelled;
}

// --do_regression: unset (""), True or False.
std::optional<bool> do_regression_of(const TrainingArguments& arguments) {
  if (arguments.do_regression.empty()) return std::nullopt;
  if (arguments.do_regression == "True" || arguments.do_regression == "False")
    return arguments.do_regression == "True";
  input_error("--do_regression takes True or False, not '", arguments.do_regression, "'");
}

// --metric_for_best_model names a metric this problem's evaluation gives: accuracy
// (single-label), mse (regression) or f1 (multi-label), as run_classification's metrics.
void check_best_metric(const TrainingArguments& arguments, gpt2::ProblemType problem) {
  std::string key = metric_for_best_model_of(arguments);
  if (key.empty()) return;
  if (!key.starts_with("eval_")) key = "eval_" + key;
  const std::string metric = classification_metric_key(problem);
  if (key != "eval_loss" && key != metric)
    input_error("--metric_for_best_model ", key, ": a ", gpt2::name_of(problem),
                " evaluation gives eval_loss and ", metric);
}

// The label list from the train examples (or the checkpoint's head when it has the same labels),
// the pad id, and the head checked against the model.
void prepare_head(const TrainingArguments& arguments, const TaskSources& labelled,
                  Prepared& prepared) {
  const gpt2::GPT2Config& model_config = prepared.model_config;
  const std::vector<LabelledText>& reference = !labelled.train.empty()        ? labelled.train
                                               : !labelled.validation.empty() ? labelled.validation
                                                                              : labelled.test;
  const gpt2::ProblemType problem = problem_type_of(reference, do_regression_of(arguments));
  check_best_metric(arguments, problem);
  std::vector<std::string> labels = label_list(reference, problem);
  if (prepared.pretrained_head && problem == gpt2::ProblemType::kRegression) {
    if (prepared.head.num_labels != 1)
      input_error("--model_name_or_path ", arguments.model_name_or_path, ": its classifier has ",
                  prepared.head.num_labels, " labels; regression (--label_column_name ",
                  arguments.label_column_name, " holds floats, or --do_regression) has one ",
                  "output (num_labels 1)");
    labels = prepared.head.id2label;
  } else if (prepared.pretrained_head) {
    std::vector<std::string> ours = labels, theirs = prepared.head.id2label;
    std::sort(ours.begin(), ours.end());
    std::sort(theirs.begin(), theirs.end());
    if (ours != theirs && !labelled.train.empty())
      input_error("--model_name_or_path ", arguments.model_name_or_path,
                  ": its classifier's labels (id2label) are not the training labels");
    labels = prepared.head.id2label;
  }
  // A checkpoint's config.json pad_token_id pads the examples; without one (GPT-2's and most
  // Llama-family LM checkpoints), eos does, as model.config.pad_token_id = eos_token_id does in
  // Hugging Face fine-tuning scripts. From scratch, the tokenizer's <|endoftext|> does.
  if (prepared.pretrained && prepared.head.pad_token_id == gpt2::kNoPadToken)
    prepared.head.pad_token_id =
        model_config.eos_token_id < 0 ? gpt2::kNoPadToken : model_config.eos_token_id;
  if (!prepared.pretrained) {
    const std::optional<text::TokenId> end_of_text = prepared.tokenizer->end_of_text_id();
    if (!end_of_text)
      input_error("the tokenizer has no <|endoftext|>, which pads the examples (pad_token_id)");
    prepared.head.pad_token_id = *end_of_text;
  }
  // The examples are padded to --max_seq_length, and without a pad id no row's last token can be
  // found (Hugging Face refuses even batches of more than one row: "Cannot handle batch sizes > 1
  // if no padding token is defined").
  if (prepared.head.pad_token_id == gpt2::kNoPadToken)
    input_error("--model_name_or_path ", arguments.model_name_or_path,
                ": config.json has no pad_token_id and no eos_token_id to pad the examples to "
                "--max_seq_length with, so a row's last token cannot be found (Hugging Face "
                "cannot handle batch sizes > 1 if no padding token is defined); set pad_token_id "
                "in config.json");
  prepared.head.num_labels = static_cast<std::int64_t>(labels.size());
  // run_classification sets config.problem_type for the labels it reads.
  prepared.head.problem_type = problem;
  prepared.head.id2label = labels;
  as_input_error("the classifier head", [&] { prepared.head.validate(model_config); });
}

class ClassificationTaskKind final : public TaskKind {
 public:
  std::string_view name() const override { return "text-classification"; }
  void check_arguments(const TrainingArguments& arguments) const override {
    if (arguments.streaming)
      throw Error("--streaming is for --task causal-lm (run_clm), not text-classification");
    if (arguments.max_seq_length < 1)
      throw Error("--max_seq_length must be at least 1, got " +
                  std::to_string(arguments.max_seq_length));
  }
  // Each problem type's (check_best_metric holds --metric_for_best_model to the run's).
  std::vector<std::string> evaluation_metrics() const override {
    return {"eval_loss", "eval_accuracy", "eval_mse", "eval_f1"};
  }
  bool planned() const override { return false; }

  TaskSources read_sources(const TrainingArguments& arguments, const DataFiles& files,
                           const fs::path& /*scratch*/) const override {
    return read_labelled_splits(arguments, files);
  }
  void load_checkpoint_config(const fs::path& folder, Prepared& prepared) const override {
    const gpt2::ClassifierCheckpoint checkpoint =
        as_input_error("--model_name_or_path " + folder.string(),
                       [&] { return gpt2::load_classifier_config(folder); });
    prepared.pretrained_head = checkpoint.has_score;
    prepared.head = checkpoint.head;
  }
  void add_tokenizer_texts(const TaskSources& sources, text::BpeTrainer& trainer) const override {
    if (sources.train.empty()) input_error("no tokenizer: give --tokenizer_name or --train_file");
    for (const LabelledText& example : sources.train) trainer.add_text(example.text);
  }
  // run_classification: ids truncated and padded to max_seq_length with the pad token.
  void prepare_data(const TrainingArguments& arguments, const DataFiles& /*files*/,
                    const TaskSources& labelled, const PrepareScope& /*scope*/,
                    Prepared& prepared) const override {
    prepared.block_size = arguments.max_seq_length;
    if (prepared.block_size > prepared.model_config.n_positions)
      input_error("--max_seq_length ", prepared.block_size, " is larger than the model's ",
                  "n_positions ", prepared.model_config.n_positions);
    prepare_head(arguments, labelled, prepared);
    const int pad = static_cast<int>(prepared.head.pad_token_id);
    auto encode = [&](const std::vector<LabelledText>& examples, const char* what) {
      return as_input_error(what, [&] {
        return encode_examples(examples, prepared.head.id2label, *prepared.head.problem_type,
                               *prepared.tokenizer, prepared.block_size, pad, what,
                               arguments.preprocessing_num_workers);
      });
    };
    prepared.classify_train = encode(labelled.train, "--train_file");
    prepared.classify_validation = encode(labelled.validation, "--validation_file");
    prepared.classify_test = encode(labelled.test, "--test_file");
    prepared.train_blocks = capped(prepared.classify_train.size(), arguments.max_train_samples);
    prepared.test_examples = capped(prepared.classify_test.size(), arguments.max_predict_samples);
    if (arguments.do_train && prepared.train_blocks == 0) input_error("--train_file: no example");
    prepared.eval_blocks = capped(prepared.classify_validation.size(), arguments.max_eval_samples);
    if (arguments.do_eval && prepared.eval_blocks == 0)
      input_error("--do_eval: the validation data holds no example");
  }
};

}  // namespace

const TaskKind& classification_task_kind() {
  static const ClassificationTaskKind kind;
  return kind;
}

}  // namespace zero::train::detail
