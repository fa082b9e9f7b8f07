// GPT-2's pre-tokenizer: splits valid UTF-8 into the pieces BPE merges, with PCRE2 (UTF, UCP, JIT).
#pragma once

#include <cstddef>
#include <string_view>

namespace zero::text::detail {

// The pattern of OpenAI's encoder.py, byte for byte.
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// The same pattern as PCRE2 must see it. In UCP mode PCRE2's \s is \p{Zs} + \h + \v, which
// keeps U+180E (a space before Unicode 6.3, now Cf); Python's regex, tiktoken's Rust regex and
// Hugging Face's Oniguruma use the White_Space property. So \s is spelled out as White_Space:
// U+0009..000D, 0020, 0085, 00A0, 1680, 2000..200A, 2028, 2029, 202F, 205F, 3000.
#define ZERO_GPT2_WHITE_SPACE \
  R"(\t-\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})"
inline constexpr std::string_view kGpt2PatternPcre2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^)" ZERO_GPT2_WHITE_SPACE
    R"(\p{L}\p{N}]+|[)" ZERO_GPT2_WHITE_SPACE R"(]+(?![^)" ZERO_GPT2_WHITE_SPACE
    R"(])|[)" ZERO_GPT2_WHITE_SPACE R"(]+)";
#undef ZERO_GPT2_WHITE_SPACE

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
