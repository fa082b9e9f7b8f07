// GPT-2's pre-tokenizer: splits valid UTF-8 into the pieces BPE merges, with PCRE2 (UTF, UCP, JIT).
#pragma once

#include <cstddef>
#include <string_view>

namespace zero::text::detail {

// The pattern of OpenAI's encoder.py, byte for byte.
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Compiled once (thread-safe to share); each thread matches with its own match data and JIT stack.
class Pretokenizer {
 public:
  Pretokenizer();
  ~Pretokenizer();
  Pretokenizer(const Pretokenizer&) = delete;
  Pretokenizer& operator=(const Pretokenizer&) = delete;

  // Calls on_piece(std::string_view) for each consecutive piece of `text`, which must be valid
  // UTF-8 (replace_invalid_utf8 first). The pieces concatenate to `text`.
  template <typename OnPiece>
  void split(std::string_view text, OnPiece&& on_piece) const {
    std::size_t offset = 0;
    while (offset < text.size()) {
      const std::size_t end = match_end(text, offset);
      on_piece(text.substr(offset, end - offset));
      offset = end;
    }
  }

  // End of the piece that starts at `offset` (the pattern matches at every position).
  std::size_t match_end(std::string_view text, std::size_t offset) const;

 private:
  void* code_;  // pcre2_code_8*
};

}  // namespace zero::text::detail
