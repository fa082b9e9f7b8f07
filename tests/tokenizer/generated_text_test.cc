// The text-generation pipeline's text (zero/text/generated_text.h) without Python: transformers'
// clean-up rules, the prompt's length counted in code points, special tokens skipped, invalid
// UTF-8 replaced. (Against transformers itself: tests/tools/generate_text_test.py.)
#include "zero/text/generated_text.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace zero::text {
namespace {

// A byte-level vocabulary without merges: id b is byte b, 256 is <|endoftext|> (special).
Tokenizer bytes_tokenizer() {
  BpeVocabulary vocabulary;
  for (int byte = 0; byte < 256; ++byte) vocabulary.tokens.emplace_back(1, static_cast<char>(byte));
  vocabulary.tokens.emplace_back("<|endoftext|>");
  vocabulary.special_ids.push_back(256);
  return Tokenizer(std::move(vocabulary));
}

std::vector<TokenId> ids_of(const std::string& bytes) {
  std::vector<TokenId> ids;
  for (const char byte : bytes) ids.push_back(static_cast<unsigned char>(byte));
  return ids;
}

TEST(CleanUpTokenization, AppliesTransformersReplacementsInOrder) {
  // The expected strings are transformers 4.46's PreTrainedTokenizerBase.clean_up_tokenization.
  EXPECT_EQ(
      clean_up_tokenization("Hello , world ! Is n't it ? I 'm here , they 're ' quoted ' and 's ."),
      "Hello, world! Isn't it? I'm here, they're'quoted'and's.");
  EXPECT_EQ(clean_up_tokenization("we 've a ' s ' end ?!"), "we've a's'end?!");
  EXPECT_EQ(clean_up_tokenization(""), "");
}

TEST(GeneratedText, IsThePromptThenTheCleanedTextPastTheCleanedPromptsLength) {
  const Tokenizer tokenizer = bytes_tokenizer();
  const std::vector<TokenId> prompt = ids_of("Hi ,");
  std::vector<TokenId> sequence = ids_of("Hi ,x .");
  sequence.push_back(256);  // eos: skipped
  // decode: "Hi ,x ." -> cleaned "Hi,x."; the cleaned prompt "Hi," is 3 long.
  EXPECT_EQ(generated_text(tokenizer, "Hi ,", prompt, sequence), "Hi ,x.");
  // The prompt as typed, even where its ids decode otherwise.
  EXPECT_EQ(generated_text(tokenizer, "typed", prompt, sequence), "typedx.");
  // Nothing new: the prompt alone.
  EXPECT_EQ(generated_text(tokenizer, "Hi ,", prompt, prompt), "Hi ,");
}

TEST(GeneratedText, CountsCodePointsAndReplacesInvalidUtf8) {
  const Tokenizer tokenizer = bytes_tokenizer();
  const std::vector<TokenId> prompt = ids_of("\xC3\xA9");  // é: 2 bytes, 1 code point
  // A character cut after 2 of its 3 bytes becomes one U+FFFD, as from_utf8_lossy.
  const std::vector<TokenId> sequence = ids_of(
      "\xC3\xA9\xE6\xBC"
      "a");
  EXPECT_EQ(generated_text(tokenizer, "\xC3\xA9", prompt, sequence),
            "\xC3\xA9\xEF\xBF\xBD"
            "a");
}

TEST(GeneratedText, DropsIdsPastTheTokenizersVocabulary) {
  const Tokenizer tokenizer = bytes_tokenizer();
  const std::vector<TokenId> sequence = {'a', 300, 'b', 257};  // a model's padded vocabulary
  EXPECT_EQ(generated_text(tokenizer, "a", {sequence.data(), 1}, sequence), "ab");
}

TEST(EncodePrompt, RecognisesSpecialTokensWrittenInTheText) {
  const Tokenizer tokenizer = bytes_tokenizer();
  EXPECT_EQ(encode_prompt(tokenizer, "a<|endoftext|>"), (std::vector<TokenId>{'a', 256}));
}

}  // namespace
}  // namespace zero::text
