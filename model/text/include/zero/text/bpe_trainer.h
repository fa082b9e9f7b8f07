// Training a byte-level BPE vocabulary (GPT-2's pre-tokenizer and byte alphabet) on a corpus.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string_view>

#include "zero/text/tokenizer.h"

namespace zero::text {

struct BpeTrainerOptions {
  std::size_t vocab_size = 8192;    // 256 bytes + merges + <|endoftext|>
  std::uint64_t min_frequency = 2;  // stop when the most frequent pair occurs fewer times
  bool add_end_of_text = true;      // append <|endoftext|> as the last id
};

// Counts pre-tokenized words over any number of texts, then learns merges: repeatedly the most
// frequent adjacent pair (ties: the smaller (left id, right id)), counts updated incrementally.
// Ids 0..255 are the bytes in GPT-2's order (bytes_to_unicode's list), then one id per merge.
// Deterministic: the same texts in the same order give the same vocabulary.
class BpeTrainer {
 public:
  explicit BpeTrainer(BpeTrainerOptions options);
  ~BpeTrainer();
  BpeTrainer(BpeTrainer&&) noexcept;
  BpeTrainer& operator=(BpeTrainer&&) noexcept;

  void add_text(std::string_view text);  // invalid UTF-8 is replaced as in encoding
  // Adds every example of each file (text_files.h formats). Throws for bad files.
  void add_files(std::span<const std::filesystem::path> files);
  std::size_t num_distinct_words() const;
  // Throws zero::Error when vocab_size < 257 (or 256 without <|endoftext|>).
  BpeVocabulary train() const;

 private:
  struct State;
  BpeTrainerOptions options_;
  std::unique_ptr<State> state_;
};

}  // namespace zero::text
