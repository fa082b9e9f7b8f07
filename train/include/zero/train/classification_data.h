// Labelled documents for sequence classification as Hugging Face's run_classification.py reads
// them: CSV (header row, RFC 4180) or JSON Lines files with text column(s) and a label column;
// the label set in sorted order (id2label), token ids truncated and right-padded to
// max_seq_length with the pad token.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

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

struct LabelledText {
  std::string text;
  std::string label;  // as written; an integer label is its decimal text
};

// Reads .csv, or .json/.jsonl (one object per line). text_columns are joined with `delimiter`
// (run_classification's --text_column_names / --text_column_delimiter); the label may be a
// string or an integer. A missing column, a non-string text, a label of another type or an empty
// label throws zero::Error naming the file, the row and the column.
std::vector<LabelledText> read_labelled_file(const std::filesystem::path& path,
                                             const std::vector<std::string>& text_columns,
                                             const std::string& delimiter,
                                             const std::string& label_column);

// run_classification's label list: the distinct labels of `examples`, sorted (numerically when
// every label is an integer, else by bytes); id k names label k.
std::vector<std::string> label_list(std::span<const LabelledText> examples);

// Token ids (N, T) right-padded with pad_id, labels (N) in [0, K).
struct ClassificationDataset {
  std::int64_t seq_len = 0;  // T
  std::vector<int> tokens;
  std::vector<int> labels;
  std::int64_t truncated = 0;  // examples longer than T (cut to their first T tokens)
  std::size_t size() const { return labels.size(); }
};

// Tokenizes `examples` (special tokens as text) into T = max_seq_length ids each. A label not in
// `labels` throws zero::Error naming it, the split (`what`) and the known labels.
ClassificationDataset encode_examples(std::span<const LabelledText> examples,
                                      const std::vector<std::string>& labels,
                                      const text::Tokenizer& tokenizer, std::int64_t max_seq_length,
                                      int pad_id, const std::string& what, int num_threads = 0);

// Splits off a validation set as datasets' train_test_split(test_size = percentage / 100,
// seed): a seeded permutation, the first ceil(n × p / 100) examples validate, the rest train
// (each in permutation order).
void split_validation(std::vector<LabelledText>& train, std::vector<LabelledText>& validation,
                      int percentage, std::uint64_t seed);

// Rows `indices` of `data` into a micro-batch of B rows: tokens (B, T) and labels (B); rows past
// indices.size() are all pad_id with label -100 (ignored).
void fill_classification_batch(const ClassificationDataset& data,
                               std::span<const std::size_t> indices, std::int64_t B, int pad_id,
                               std::vector<int>& tokens, std::vector<int>& labels);

}  // namespace zero::train
