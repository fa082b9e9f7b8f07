// Lazy block streams: chunked reading and tokenizing, group_texts per group, rank shards.
#include "zero/text/streaming.h"

#include <algorithm>
#include <optional>

#include "zero/core/error.h"
#include "zero/text/text_files.h"

namespace zero::text {

namespace fs = std::filesystem;

struct StreamingBlocks::Reader {
  std::vector<fs::path> files;
  std::size_t file_index = 0;
  std::optional<MappedFile> file;
  std::size_t offset = 0;
  std::size_t line_number = 1;  // of the byte at offset
};

StreamingBlocks::StreamingBlocks(std::vector<fs::path> files, Tokenizer tokenizer,
                                 std::size_t block_size, std::size_t group_examples,
                                 SpecialTokens special, AddSpecialTokens add_special)
    : reader_(std::make_unique<Reader>()),
      tokenizer_(std::move(tokenizer)),
      block_size_(block_size),
      group_examples_(group_examples),
      special_(special),
      add_special_(add_special) {
  ZERO_CHECK(!files.empty(), "no data files given for streaming");
  ZERO_CHECK(block_size_ > 0, "block_size must be positive");
  for (const fs::path& path : files)
    ZERO_CHECK(fs::exists(path), "data file ", path, " does not exist");
  reader_->files = std::move(files);
}

StreamingBlocks::~StreamingBlocks() = default;
StreamingBlocks::StreamingBlocks(StreamingBlocks&&) noexcept = default;
StreamingBlocks& StreamingBlocks::operator=(StreamingBlocks&&) noexcept = default;

void StreamingBlocks::reset() {
  reader_->file_index = 0;
  reader_->file.reset();
  reader_->offset = 0;
  group_.clear();
  group_count_ = 0;
  ready_.clear();
  blocks_read_ = 0;
}

void StreamingBlocks::close_group() {
  const std::size_t num_blocks = group_.size() / block_size_;
  for (std::size_t b = 0; b < num_blocks; ++b)
    ready_.emplace_back(group_.begin() + static_cast<std::ptrdiff_t>(b * block_size_),
                        group_.begin() + static_cast<std::ptrdiff_t>((b + 1) * block_size_));
  group_.clear();
  group_count_ = 0;
}

bool StreamingBlocks::refill() {
  constexpr std::size_t kChunkBytes = 1 << 20;
  Reader& reader = *reader_;
  while (true) {
    if (!reader.file) {
      if (reader.file_index >= reader.files.size()) {
        if (group_count_ > 0) close_group();  // the last, partial group (run_clm's last batch)
        return false;
      }
      reader.file.emplace(open_text_file(reader.files[reader.file_index]));
      reader.offset = 0;
      reader.line_number = 1;
    }
    const std::string_view bytes = reader.file->bytes();
    if (reader.offset >= bytes.size()) {
      reader.file.reset();
      ++reader.file_index;
      continue;
    }
    std::size_t end = std::min(bytes.size(), reader.offset + kChunkBytes);
    if (end < bytes.size()) {
      const std::size_t newline = bytes.find('\n', end - 1);
      end = newline == std::string_view::npos ? bytes.size() : newline + 1;
    }
    const std::string_view chunk = bytes.substr(reader.offset, end - reader.offset);
    reader.offset = end;
    for_each_example(
        chunk, format_of(reader.file->path()), reader.file->path(),
        [&](std::string_view example) {
          tokenizer_.encode_append(example, group_, special_, add_special_);
          ++group_count_;
          if (group_examples_ > 0 && group_count_ == group_examples_) close_group();
        },
        reader.line_number);
    reader.line_number += static_cast<std::size_t>(std::count(chunk.begin(), chunk.end(), '\n'));
    if (!ready_.empty()) return true;
  }
}

bool StreamingBlocks::next(std::vector<TokenId>& block) {
  if (ready_.empty() && !refill() && ready_.empty()) return false;
  block = std::move(ready_.front());
  ready_.pop_front();
  ++blocks_read_;
  return true;
}

StreamingShard::StreamingShard(StreamingBlocks blocks, std::size_t global_batch_size,
                               int world_size, int rank)
    : blocks_(std::move(blocks)),
      global_batch_size_(global_batch_size),
      world_size_(world_size),
      rank_(rank) {
  ZERO_CHECK(world_size >= 1 && rank >= 0 && rank < world_size, "rank ", rank,
             " outside a world of ", world_size);
  ZERO_CHECK(
      global_batch_size >= 1 && global_batch_size % static_cast<std::size_t>(world_size) == 0,
      "global batch of ", global_batch_size, " blocks does not split evenly over ", world_size,
      " ranks");
}

bool StreamingShard::next(std::vector<std::vector<TokenId>>& local_blocks) {
  const std::size_t share = global_batch_size_ / static_cast<std::size_t>(world_size_);
  const std::size_t first = share * static_cast<std::size_t>(rank_);
  local_blocks.clear();
  std::vector<TokenId> block;
  for (std::size_t i = 0; i < global_batch_size_; ++i) {
    if (!blocks_.next(block)) return false;
    if (i >= first && i < first + share) local_blocks.push_back(std::move(block));
  }
  ++step_;
  return true;
}

void StreamingShard::seek(std::uint64_t step) {
  blocks_.reset();
  step_ = 0;
  std::vector<std::vector<TokenId>> discard;
  while (step_ < step)
    ZERO_CHECK(next(discard), "cannot resume the stream at step ", step, ": it has only ", step_,
               " global batches");
}

}  // namespace zero::text
