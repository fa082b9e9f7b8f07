// The pre-tokenizer: splits valid UTF-8 into the pieces BPE merges by one or more regular
// expressions (GPT-2's, or a tokenizer.json's Split patterns), with PCRE2 (UTF, UCP, JIT).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace zero::text::detail {

// The pattern of OpenAI's encoder.py, byte for byte (also Hugging Face's ByteLevel use_regex).
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Python's regex, tiktoken's Rust regex and Hugging Face's Oniguruma take \s as the White_Space
// property. In UCP mode PCRE2's \s is \p{Zs} + \h + \v, which keeps U+180E (a space before
// Unicode 6.3, now Cf), so patterns spell \s out as these code points.
inline constexpr std::string_view kWhiteSpaceClassBody =
    R"(\t-\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

// A Hugging Face tokenizer.json pattern (Oniguruma, Ruby syntax) as PCRE2 must see it: \s and \S
// spelled as White_Space, Oniguruma's \v (U+000B only) as \x{0B}. Constructs whose meaning differs
// between the two engines and that tokenizer patterns do not use (\w, \W, \b, \B, \h, \H, \R, \X,
// \K, \G, \A, \z, \Z, ^, $, \S inside a class) are refused with zero::Error naming the pattern.
std::string oniguruma_to_pcre2(std::string_view pattern);

// Compiled once (thread-safe to share); each thread matches with its own match data and JIT stack.
class Pretokenizer {
 public:
  // GPT-2's pattern.
  Pretokenizer();
  // Hugging Face's Split(pattern, behavior Isolated) for each PCRE2 pattern in turn, each applied
  // to the pieces of the one before: every match is a piece, and so is the text between two
  // matches. An empty match only separates pieces. Throws zero::Error when a pattern does not
  // compile.
  explicit Pretokenizer(const std::vector<std::string>& pcre2_patterns);
  ~Pretokenizer();
  Pretokenizer(const Pretokenizer&) = delete;
  Pretokenizer& operator=(const Pretokenizer&) = delete;

  // Calls on_piece(std::string_view) for each consecutive piece of `text`, which must be valid
  // UTF-8 (replace_invalid_utf8 first). The pieces concatenate to `text`.
  template <typename OnPiece>
  void split(std::string_view text, OnPiece&& on_piece) const {
    split_from(0, text, on_piece);
  }

 private:
  struct Match {
    std::size_t start, end;  // start == std::string_view::npos when there is none
  };
  template <typename OnPiece>
  void split_from(std::size_t level, std::string_view text, OnPiece& on_piece) const {
    if (level == codes_.size()) {
      on_piece(text);
      return;
    }
    // The last pattern's pieces go to on_piece directly (inlined: GPT-2's single pattern).
    const bool last = level + 1 == codes_.size();
    auto emit = [&](std::string_view piece) {
      if (last)
        on_piece(piece);
      else
        split_from(level + 1, piece, on_piece);
    };
    std::size_t piece_start = 0;
    std::size_t search = 0;
    while (search < text.size()) {
      const Match match = find(level, text, search);
      if (match.start == std::string_view::npos) break;
      if (match.start > piece_start) emit(text.substr(piece_start, match.start - piece_start));
      if (match.end > match.start) {
        emit(text.substr(match.start, match.end - match.start));
        piece_start = search = match.end;
      } else {
        piece_start = match.start;
        search = next_character(text, match.start);
      }
    }
    if (piece_start < text.size()) emit(text.substr(piece_start));
  }
  // The leftmost match of pattern `level` at or after byte `offset` of `text`.
  Match find(std::size_t level, std::string_view text, std::size_t offset) const;
  static std::size_t next_character(std::string_view text, std::size_t offset);

  std::vector<void*> codes_;  // pcre2_code_8*, one per pattern
};

}  // namespace zero::text::detail
