// run_clm's data: train/validation splits of a token stream, chunked into blocks by group_texts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "zero/text/token_stream.h"

namespace zero::text {

// Fixed-length blocks of a shared token stream. For causal LM training the labels are the block
// itself (the model shifts), as in run_clm.
class BlockDataset {
 public:
  BlockDataset() = default;
  BlockDataset(std::shared_ptr<const TokenStream> stream, std::vector<std::uint64_t> block_starts,
               std::size_t block_size);

  std::size_t size() const { return starts_.size(); }
  std::size_t block_size() const { return block_size_; }
  std::span<const TokenId> block(std::size_t index) const;  // throws for index >= size()
  std::uint64_t block_start(std::size_t index) const { return starts_.at(index); }
  std::uint64_t num_tokens() const { return static_cast<std::uint64_t>(size()) * block_size_; }

 private:
  std::shared_ptr<const TokenStream> stream_;
  std::vector<std::uint64_t> starts_;  // token offsets
  std::size_t block_size_ = 0;
};

// run_clm's group_texts on examples [first_example, last_example): the examples are taken in
// groups of `group_examples` (datasets.map(batched=True)'s batch_size, 1000 in run_clm); each
// group's ids are concatenated and cut into block_size blocks, its remainder dropped. 0 means one
// group for the whole range (concatenate everything, drop one remainder).
BlockDataset group_texts(std::shared_ptr<const TokenStream> stream, std::size_t first_example,
                         std::size_t last_example, std::size_t block_size,
                         std::size_t group_examples = 1000);

// The example index where datasets' "train[:p%]" ends and "train[p%:]" begins: p·n/100 rounded
// half to even (datasets' default "closest" rounding). Throws for p outside [0, 100].
std::size_t percent_boundary(std::size_t num_examples, int percent);

// run_clm's DataTrainingArguments (the non-streaming part).
struct DataArguments {
  std::vector<std::filesystem::path> train_files;
  std::vector<std::filesystem::path> validation_files;  // empty: split off the train files
  int validation_split_percentage = 5;  // run_clm: the first p% of train examples validate
  std::size_t block_size = 1024;
  std::size_t group_examples = 1000;  // see group_texts
  std::filesystem::path cache_dir;    // empty: no token cache
  bool overwrite_cache = false;       // rebuild the token cache even when it is valid
  TokenizeOptions tokenize;
};

struct LmDatasets {
  BlockDataset train;
  BlockDataset validation;  // may be empty (validation_split_percentage 0)
};

// run_clm's splits of token streams already loaded (a file's, or ids given in memory: each example
// one row of a pre-tokenized dataset's input_ids): each grouped into blocks by group_texts; with
// `validation` null, the first validation_split_percentage% of the train examples validate.
// Throws zero::Error naming `train_name` or `validation_name` when a split has no full block.
LmDatasets split_lm_datasets(std::shared_ptr<const TokenStream> train,
                             std::shared_ptr<const TokenStream> validation,
                             const DataArguments& arguments, std::string_view train_name,
                             std::string_view validation_name);

// Tokenizes (or maps the cache of) the files and builds the splits as run_clm does. Throws
// zero::Error naming the files when the train split has no full block (corpus shorter than one
// block), or when explicit validation files are.
LmDatasets load_lm_datasets(const Tokenizer& tokenizer, const DataArguments& arguments);

}  // namespace zero::text
