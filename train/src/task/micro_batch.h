// One rank's micro-batch of a causal LM step: tokens and next-token targets from blocks.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "zero/text/lm_dataset.h"
#include "zero/text/tokenizer.h"

namespace zero::train::detail {

// (B, T): tokens and next-token targets, -100 where nothing counts. `rows` of the B hold data
// (the others are padding), with `non_padding_tokens` tokens before their padding in all
// (--include_num_input_tokens_seen counts them).
struct MicroBatch {
  std::vector<int> tokens;
  std::vector<int> targets;
  // text-classification's regression and multi-label rows: (B, K) float targets (targets then
  // holds 0 for a row of data, -100 for padding).
  std::vector<float> float_targets;
  std::uint64_t rows = 0;
  std::uint64_t non_padding_tokens = 0;

  std::uint64_t input_tokens(bool non_padding, std::int64_t T) const {
    return non_padding ? non_padding_tokens : rows * static_cast<std::uint64_t>(T);
  }
};

// Fills `batch` from blocks of T tokens (rows past the blocks given stay padding).
void fill_micro_batch(std::span<const std::span<const text::TokenId>> blocks, std::int64_t B,
                      std::int64_t T, MicroBatch& batch);
// The blocks `indices` of `data`.
void fill_micro_batch(const text::BlockDataset& data, std::span<const std::size_t> indices,
                      std::int64_t B, std::int64_t T, MicroBatch& batch);
// Rows held as vectors (streaming).
void fill_micro_batch(const std::vector<std::vector<text::TokenId>>& rows, std::int64_t B,
                      std::int64_t T, MicroBatch& batch);

}  // namespace zero::train::detail
