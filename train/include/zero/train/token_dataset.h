// Token ids given in memory as a run's data (TrainingArguments::train_dataset/validation_dataset):
// a pre-tokenized dataset's input_ids column, one row per example, in place of --train_file /
// --validation_file. The C++ side of the Python module's train_dataset=[[ids], ...] / 2-D arrays.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "zero/text/token_stream.h"

namespace zero::train {

// The rows of a token dataset as one stream (row r is example r) and the name errors give it
// ("train_dataset", Python's "eval_dataset"). The run treats the rows as run_clm treats the
// examples of a text file once tokenized: group_texts concatenates each 1000 rows and cuts them
// into --block_size blocks, dropping each group's remainder; rows of exactly block_size tokens
// therefore come out unchanged, one block each. The ids are used as they are (no bos or eos
// added), and must be below the model's vocab_size (checked when the run starts).
struct TokenDataset {
  std::string name;
  std::shared_ptr<const text::TokenStream> rows;
};

// Builds a TokenDataset row by row, copying each id once into the stream it finishes into.
// Throws InputError naming the row and position ("train_dataset[3][17]: token id -1 is
// negative") for an id below 0 or above the largest text::TokenId.
class TokenDatasetBuilder {
 public:
  explicit TokenDatasetBuilder(std::string name);

  void reserve(std::size_t num_rows, std::size_t num_tokens);
  void add_row(std::span<const std::int32_t> ids);
  void add_row(std::span<const std::int64_t> ids);
  // `count` ids `stride_elements` apart (a column of a 2-D array, a strided view).
  void add_row(const std::int32_t* ids, std::size_t count, std::ptrdiff_t stride_elements);
  void add_row(const std::int64_t* ids, std::size_t count, std::ptrdiff_t stride_elements);
  std::size_t num_rows() const { return offsets_.size() - 1; }

  // The dataset; throws InputError naming it when it has no row. The builder is then empty.
  std::shared_ptr<const TokenDataset> finish();

 private:
  template <typename Id>
  void append(const Id* ids, std::size_t count, std::ptrdiff_t stride_elements);

  std::string name_;
  std::vector<text::TokenId> ids_;
  std::vector<std::uint64_t> offsets_{0};
};

// Throws InputError naming the dataset, row and position of the first id at or above
// `vocab_size` ("train_dataset[3][17]: token id 50257 is not below the model's vocab_size
// 50257").
void check_token_ids(const TokenDataset& dataset, std::int64_t vocab_size);

}  // namespace zero::train
