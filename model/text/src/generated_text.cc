// The text-generation pipeline's prompt ids and returned text (generated_text.h).
#include "zero/text/generated_text.h"

#include <array>
#include <cstddef>
#include <utility>

namespace zero::text {

std::vector<TokenId> encode_prompt(const Tokenizer& tokenizer, std::string_view prompt_text) {
  return tokenizer.encode(prompt_text, SpecialTokens::kRecognize, AddSpecialTokens::kYes);
}

std::string clean_up_tokenization(std::string_view text) {
  // Applied one after another over the whole text, in this order, as Python's chained replace().
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 10> kReplacements{{
      {" .", "."},
      {" ?", "?"},
      {" !", "!"},
      {" ,", ","},
      {" ' ", "'"},
      {" n't", "n't"},
      {" 'm", "'m"},
      {" 's", "'s"},
      {" 've", "'ve"},
      {" 're", "'re"},
  }};
  std::string result(text);
  for (const auto& [from, to] : kReplacements) {
    std::string replaced;
    replaced.reserve(result.size());
    std::size_t start = 0;
    for (std::size_t at = result.find(from); at != std::string::npos;
         at = result.find(from, start)) {
      replaced.append(result, start, at - start).append(to);
      start = at + from.size();
    }
    replaced.append(result, start, std::string::npos);
    result = std::move(replaced);
  }
  return result;
}

namespace {

// decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=True) as Python's str. Ids
// the tokenizer does not have (a model's vocabulary padded past it) decode to nothing, as
// tokenizers' decode drops them.
std::string decode_for_pipeline(const Tokenizer& tokenizer, std::span<const TokenId> ids) {
  std::vector<TokenId> known;
  known.reserve(ids.size());
  for (const TokenId id : ids)
    if (id < tokenizer.vocab_size()) known.push_back(id);
  const std::string raw = tokenizer.decode(known, SkipSpecialTokens::kYes);
  std::string storage;
  return clean_up_tokenization(replace_invalid_utf8(raw, storage));
}

bool is_continuation_byte(char byte) { return (static_cast<unsigned char>(byte) & 0xC0) == 0x80; }

}  // namespace

std::string generated_text(const Tokenizer& tokenizer, std::string_view prompt_text,
                           std::span<const TokenId> prompt_ids, std::span<const TokenId> sequence) {
  const std::string prompt = decode_for_pipeline(tokenizer, prompt_ids);
  const std::string text = decode_for_pipeline(tokenizer, sequence);
  std::size_t prompt_code_points = 0;
  for (const char byte : prompt) prompt_code_points += is_continuation_byte(byte) ? 0 : 1;
  // text[prompt_length:], a slice by code points (empty when the text is shorter).
  std::size_t offset = 0;
  for (std::size_t skipped = 0; offset < text.size(); ++offset) {
    if (!is_continuation_byte(text[offset])) {
      if (skipped == prompt_code_points) break;
      ++skipped;
    }
  }
  return std::string(prompt_text) + text.substr(offset);
}

}  // namespace zero::text
