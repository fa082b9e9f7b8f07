// --streaming: blocks read and tokenized lazily, file by file, never holding the corpus in memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <memory>
#include <vector>

#include "zero/text/tokenizer.h"

namespace zero::text {

// The blocks of group_texts over the files' examples in order (the same blocks, in the same order,
// as group_texts over the whole token stream), produced ~1 MiB of text at a time. Holds one chunk
// of text and one group of ids. Without random access there is no shuffle and no validation split:
// blocks come in corpus order, like Hugging Face's IterableDataset without a shuffle buffer. Each
// example is encoded as TokenizeOptions' defaults say (token_stream.h): added tokens in the text
// recognised (`special`), the tokenizer's template added (`add_special`; a Llama tokenizer's bos).
class StreamingBlocks {
 public:
  StreamingBlocks(std::vector<std::filesystem::path> files, Tokenizer tokenizer,
                  std::size_t block_size, std::size_t group_examples = 1000,
                  SpecialTokens special = SpecialTokens::kRecognize,
                  AddSpecialTokens add_special = AddSpecialTokens::kYes);
  ~StreamingBlocks();
  StreamingBlocks(StreamingBlocks&&) noexcept;
  StreamingBlocks& operator=(StreamingBlocks&&) noexcept;

  // The next block; false at the end of the data (reset() starts a new pass).
  bool next(std::vector<TokenId>& block);
  void reset();
  std::uint64_t blocks_read() const { return blocks_read_; }

 private:
  bool refill();  // tokenizes the next chunk; false at the end
  void close_group();
  struct Reader;
  std::unique_ptr<Reader> reader_;
  Tokenizer tokenizer_;
  std::size_t block_size_;
  std::size_t group_examples_;
  SpecialTokens special_;
  AddSpecialTokens add_special_;
  std::vector<TokenId> group_;   // ids of the open group
  std::size_t group_count_ = 0;  // examples in it
  std::deque<std::vector<TokenId>> ready_;
  std::uint64_t blocks_read_ = 0;
};

// A rank's share of sequential global batches from a stream (Hugging Face's IterableDatasetShard
// layout): global batch s is blocks [s·G, (s+1)·G) of the stream, rank r takes
// [s·G + r·G/W, s·G + (r+1)·G/W). A final partial global batch is dropped. Every rank reads (and
// tokenizes) the whole stream; resuming at step s skips s·G blocks.
class StreamingShard {
 public:
  StreamingShard(StreamingBlocks blocks, std::size_t global_batch_size, int world_size, int rank);

  // This rank's G/W blocks of the next global batch; false when the stream has no full batch left.
  bool next(std::vector<std::vector<TokenId>>& local_blocks);
  std::uint64_t step() const { return step_; }
  // Restarts the stream and skips to global batch `step` (for resuming).
  void seek(std::uint64_t step);

 private:
  StreamingBlocks blocks_;
  std::size_t global_batch_size_;
  int world_size_;
  int rank_;
  std::uint64_t step_ = 0;
};

}  // namespace zero::text
