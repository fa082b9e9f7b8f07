// Labelled documents for sequence classification as Hugging Face's run_classification.py reads
// them: CSV (header row, RFC 4180) or JSON Lines files with text column(s) and a label column
// (classes, float regression targets, or lists of classes for multi-label classification); the
// problem type the labels ask for, the label set in sorted order (id2label), token ids truncated
// and right-padded to max_seq_length with the pad token.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "zero/gpt2/classifier.h"
#include "zero/text/tokenizer.h"

namespace zero::train {

// A CSV file: the header and the rows (each as many fields as the header). RFC 4180: quoted
// fields may hold commas, quotes ("") and line breaks; blank lines are skipped. Throws
// zero::Error naming the file and row for a ragged row or an unclosed quote.
struct CsvTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};
CsvTable read_csv_table(const std::filesystem::path& path);

// A label column's type as datasets infers it for a file: CSV (pandas) reads a column of integers
// as integers, of numbers with one not an integer as floats, and anything else as strings; JSON
// Lines (pyarrow) reads integers, floats (integers beside them too), strings, or lists.
enum class LabelKind : std::uint8_t { kString, kInteger, kFloat, kList };
std::string_view name_of(LabelKind kind);  // "string", "integer", "float", "list"

struct LabelledText {
  std::string text;
  std::string label;  // as written (an integer as its decimal text); empty for a list
  std::vector<std::string> classes;     // a list label's, as written (integers as decimal text)
  LabelKind kind = LabelKind::kString;  // the file's label column's
};

// Reads .csv, or .json/.jsonl (one object per line). text_columns are joined with `delimiter`
// (run_classification's --text_column_names / --text_column_delimiter); the label may be a
// string, an integer, a float, or (JSON) a list of strings or integers; every example of a file
// gets the file's LabelKind. A missing column, a non-string text, a label of another type, an
// empty label, or labels of two kinds in one JSON file (strings beside numbers, lists beside
// scalars) throw zero::Error naming the file, the row, the column and the value.
std::vector<LabelledText> read_labelled_file(const std::filesystem::path& path,
                                             const std::vector<std::string>& text_columns,
                                             const std::string& delimiter,
                                             const std::string& label_column);

// run_classification's problem type for the train split's labels (`examples`): regression when
// do_regression is true, or unset (nullopt, its None) and the labels are floats; multi-label
// classification when they are lists; single-label classification otherwise.
gpt2::ProblemType problem_type_of(std::span<const LabelledText> examples,
                                  std::optional<bool> do_regression);

// The metric run_classification evaluates a problem type by, as its log key: eval_accuracy
// (single-label), eval_mse (regression), eval_f1 (multi-label: micro F1 of logits > 0).
std::string classification_metric_key(gpt2::ProblemType problem);

// run_classification's label list: the distinct labels of `examples` (the classes of list
// labels), sorted (numerically when every label is an integer, else by bytes); id k names label
// k. Regression has one output and no classes: {"LABEL_0"}, as transformers names it.
std::vector<std::string> label_list(std::span<const LabelledText> examples,
                                    gpt2::ProblemType problem = gpt2::ProblemType::kSingleLabel);

// Token ids (N, T) right-padded with pad_id; single-label: labels (N) in [0, K); regression and
// multi-label: targets (N, K), the value (K = 1) or the multi-hot classes.
struct ClassificationDataset {
  gpt2::ProblemType problem = gpt2::ProblemType::kSingleLabel;
  std::int64_t num_labels = 0;  // K
  std::int64_t seq_len = 0;     // T
  std::vector<int> tokens;
  std::vector<int> labels;
  std::vector<float> targets;
  std::int64_t truncated = 0;  // examples longer than T (cut to their first T tokens)
  std::size_t size() const {
    return seq_len > 0 ? tokens.size() / static_cast<std::size_t>(seq_len) : 0;
  }
  bool float_targets() const { return problem != gpt2::ProblemType::kSingleLabel; }
};

// Tokenizes `examples` (special tokens as text) into T = max_seq_length ids each, their labels
// as `problem` reads them. Throws zero::Error naming the split (`what`), the example and its
// label for: single-label, a list label or a label not in `labels` (naming the known labels);
// regression, a label that is not a number (a string or a list); multi-label, a label that is not
// a list, or a class not in `labels`.
ClassificationDataset encode_examples(std::span<const LabelledText> examples,
                                      const std::vector<std::string>& labels,
                                      gpt2::ProblemType problem, const text::Tokenizer& tokenizer,
                                      std::int64_t max_seq_length, int pad_id,
                                      const std::string& what, int num_threads = 0);

// Splits off a validation set as datasets' train_test_split(test_size = percentage / 100,
// seed): a seeded permutation, the first ceil(n × p / 100) examples validate, the rest train
// (each in permutation order).
void split_validation(std::vector<LabelledText>& train, std::vector<LabelledText>& validation,
                      int percentage, std::uint64_t seed);

// Rows `indices` of `data` into a micro-batch of B rows: tokens (B, T) and labels (B); rows past
// indices.size() are all pad_id with label -100 (ignored). With float targets (regression,
// multi-label) also `targets` (B, K), the rows past indices.size() NaN (ignored), and labels 0
// for the rows given.
void fill_classification_batch(const ClassificationDataset& data,
                               std::span<const std::size_t> indices, std::int64_t B, int pad_id,
                               std::vector<int>& tokens, std::vector<int>& labels);
void fill_classification_batch(const ClassificationDataset& data,
                               std::span<const std::size_t> indices, std::int64_t B, int pad_id,
                               std::vector<int>& tokens, std::vector<int>& labels,
                               std::vector<float>& targets);

}  // namespace zero::train
