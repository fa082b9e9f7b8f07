// Micro-batches from token blocks (micro_batch.h).
#include "task/micro_batch.h"

namespace zero::train::detail {

void fill_micro_batch(std::span<const std::span<const text::TokenId>> blocks, std::int64_t B,
                      std::int64_t T, MicroBatch& batch) {
  batch.tokens.assign(static_cast<std::size_t>(B * T), 0);
  batch.targets.assign(static_cast<std::size_t>(B * T), -100);
  batch.rows = blocks.size();
  batch.non_padding_tokens = batch.rows * static_cast<std::uint64_t>(T);  // blocks are full
  for (std::size_t b = 0; b < blocks.size(); ++b)
    for (std::int64_t t = 0; t < T; ++t) {
      batch.tokens[b * T + t] = static_cast<int>(blocks[b][t]);
      if (t + 1 < T) batch.targets[b * T + t] = static_cast<int>(blocks[b][t + 1]);
    }
}

void fill_micro_batch(const text::BlockDataset& data, std::span<const std::size_t> indices,
                      std::int64_t B, std::int64_t T, MicroBatch& batch) {
  std::vector<std::span<const text::TokenId>> blocks;
  for (std::size_t index : indices) blocks.push_back(data.block(index));
  fill_micro_batch(blocks, B, T, batch);
}

void fill_micro_batch(const std::vector<std::vector<text::TokenId>>& rows, std::int64_t B,
                      std::int64_t T, MicroBatch& batch) {
  std::vector<std::span<const text::TokenId>> blocks(rows.begin(), rows.end());
  fill_micro_batch(blocks, B, T, batch);
}

}  // namespace zero::train::detail
