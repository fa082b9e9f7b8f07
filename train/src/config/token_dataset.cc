// Token datasets given in memory: rows of ids checked and copied once into a token stream.
#include "zero/train/token_dataset.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "config/input_checks.h"

namespace zero::train {

using detail::input_error;

TokenDatasetBuilder::TokenDatasetBuilder(std::string name) : name_(std::move(name)) {}

void TokenDatasetBuilder::reserve(std::size_t num_rows, std::size_t num_tokens) {
  offsets_.reserve(num_rows + 1);
  ids_.reserve(num_tokens);
}

template <typename Id>
void TokenDatasetBuilder::append(const Id* ids, std::size_t count, std::ptrdiff_t stride_elements) {
  constexpr auto kLargest = static_cast<std::int64_t>(std::numeric_limits<text::TokenId>::max());
  const std::size_t row = num_rows();
  const std::size_t first = ids_.size();
  ids_.resize(first + count);
  for (std::size_t i = 0; i < count; ++i) {
    const auto id =
        static_cast<std::int64_t>(ids[static_cast<std::ptrdiff_t>(i) * stride_elements]);
    if (id < 0 || id > kLargest) {
      ids_.resize(first);
      input_error(name_, "[", row, "][", i, "]: token id ", id,
                  id < 0 ? " is negative" : " is larger than any token id");
    }
    ids_[first + i] = static_cast<text::TokenId>(id);
  }
  offsets_.push_back(ids_.size());
}

void TokenDatasetBuilder::add_row(std::span<const std::int32_t> ids) {
  append(ids.data(), ids.size(), 1);
}
void TokenDatasetBuilder::add_row(std::span<const std::int64_t> ids) {
  append(ids.data(), ids.size(), 1);
}
void TokenDatasetBuilder::add_row(const std::int32_t* ids, std::size_t count,
                                  std::ptrdiff_t stride_elements) {
  append(ids, count, stride_elements);
}
void TokenDatasetBuilder::add_row(const std::int64_t* ids, std::size_t count,
                                  std::ptrdiff_t stride_elements) {
  append(ids, count, stride_elements);
}

std::shared_ptr<const TokenDataset> TokenDatasetBuilder::finish() {
  if (num_rows() == 0) input_error(name_, ": no rows of token ids");
  auto dataset = std::make_shared<TokenDataset>();
  dataset->name = name_;
  dataset->rows = std::make_shared<const text::TokenStream>(std::exchange(ids_, {}),
                                                            std::exchange(offsets_, {0}));
  return dataset;
}

void check_token_ids(const TokenDataset& dataset, std::int64_t vocab_size) {
  const std::span<const text::TokenId> ids = dataset.rows->tokens();
  const auto at = std::find_if(ids.begin(), ids.end(), [&](text::TokenId id) {
    return static_cast<std::int64_t>(id) >= vocab_size;
  });
  if (at == ids.end()) return;
  const auto position = static_cast<std::uint64_t>(at - ids.begin());
  const std::span<const std::uint64_t> offsets = dataset.rows->example_offsets();
  // The row holding `position`: the last whose offset is at or before it (empty rows skipped).
  const auto row = static_cast<std::size_t>(
      std::upper_bound(offsets.begin(), offsets.end(), position) - offsets.begin() - 1);
  input_error(dataset.name, "[", row, "][", position - offsets[row], "]: token id ", *at,
              " is not below the model's vocab_size ", vocab_size);
}

}  // namespace zero::train
