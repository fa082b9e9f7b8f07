// BPE training: merge order, vocabulary size, determinism, save/load round trip.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "../common/test_data.h"
#include "zero/core/error.h"
#include "zero/text/bpe_trainer.h"
#include "zero/text/tokenizer.h"

namespace zero::text {
namespace {

std::string corpus() {
  std::string text;
  for (int i = 0; i < 200; ++i)
    text += "the quick brown fox jumps over the lazy dog; naïve café 🙂 " +
            std::to_string(i % 17) + "\n";
  return text;
}

TEST(BpeTrainer, LearnsMostFrequentPairsFirst) {
  BpeTrainer trainer({260, 1, true});
  trainer.add_text("aaaa aaaa aaaa bc bc");
  const BpeVocabulary vocabulary = trainer.train();
  ASSERT_GE(vocabulary.merges.size(), 2u);
  const auto& [left, right] = vocabulary.merges[0];
  EXPECT_EQ(vocabulary.tokens[left] + vocabulary.tokens[right], "aa");  // 9 "a a" pairs
  EXPECT_EQ(vocabulary.tokens.back(), "<|endoftext|>");
  EXPECT_EQ(vocabulary.special_ids,
            std::vector<TokenId>{static_cast<TokenId>(vocabulary.tokens.size() - 1)});
}

TEST(BpeTrainer, ReachesTheVocabularySizeAndIsDeterministic) {
  BpeTrainer first({300, 2, true}), second({300, 2, true});
  first.add_text(corpus());
  second.add_text(corpus());
  const BpeVocabulary a = first.train(), b = second.train();
  EXPECT_EQ(a.tokens.size(), 300u);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.merges, b.merges);
  // Ids 0..255 are the bytes in GPT-2's order: '!' first.
  EXPECT_EQ(a.tokens[0], "!");
}

TEST(BpeTrainer, MinFrequencyStopsEarly) {
  BpeTrainer trainer({5000, 2, true});
  trainer.add_text(corpus());
  const BpeVocabulary vocabulary = trainer.train();
  EXPECT_LT(vocabulary.tokens.size(), 5000u);
  EXPECT_THROW(BpeTrainer({100, 2, true}).train(), Error);
}

TEST(BpeTrainer, SavedFilesLoadAndRoundTrip) {
  BpeTrainer trainer({290, 2, true});
  trainer.add_text(corpus());
  const BpeVocabulary vocabulary = trainer.train();
  const auto folder = testing::scratch_dir("bpe_trainer");
  save_vocab_and_merges(vocabulary, folder);
  const Tokenizer loaded = Tokenizer::load(folder);
  const Tokenizer direct(vocabulary);
  EXPECT_EQ(loaded.fingerprint(), direct.fingerprint());
  const std::string text = corpus() + "unseen words: zebra 42 <|endoftext|> \xff end";
  const auto ids = loaded.encode(text, SpecialTokens::kRecognize);
  EXPECT_EQ(ids, direct.encode(text, SpecialTokens::kRecognize));
  std::string replaced;
  EXPECT_EQ(loaded.decode(ids), replace_invalid_utf8(text, replaced));
  EXPECT_LT(ids.size(), text.size() / 2);
  EXPECT_EQ(loaded.end_of_text_id(), 289u);
  std::filesystem::remove_all(folder);
}

// tokenizer.json: merges as "a b" strings (older tokenizers) or ["a", "b"] pairs (newer), and the
// special token listed only in added_tokens.
TEST(BpeTrainer, TokenizerJsonFormsLoad) {
  BpeTrainer trainer({290, 2, true});
  trainer.add_text(corpus());
  const BpeVocabulary vocabulary = trainer.train();
  const Tokenizer direct(vocabulary);
  const auto folder = testing::scratch_dir("tokenizer_json");
  for (bool pairs : {false, true}) {
    nlohmann::json vocab = nlohmann::json::object(), merges = nlohmann::json::array();
    for (std::size_t id = 0; id + 1 < vocabulary.tokens.size(); ++id)
      vocab[bytes_to_unicode_string(vocabulary.tokens[id])] = id;
    for (const auto& [left, right] : vocabulary.merges) {
      const std::string a = bytes_to_unicode_string(vocabulary.tokens[left]);
      const std::string b = bytes_to_unicode_string(vocabulary.tokens[right]);
      if (pairs)
        merges.push_back({a, b});
      else
        merges.push_back(a + " " + b);
    }
    nlohmann::json document = {
        {"version", "1.0"},
        {"added_tokens",
         {{{"id", vocabulary.tokens.size() - 1}, {"content", "<|endoftext|>"}, {"special", true}}}},
        {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
        {"decoder", {{"type", "ByteLevel"}}},
        {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
    std::ofstream(folder / "tokenizer.json") << document.dump(pairs ? 2 : -1);
    const Tokenizer loaded = Tokenizer::load(folder);
    EXPECT_EQ(loaded.fingerprint(), direct.fingerprint()) << (pairs ? "pairs" : "strings");
    EXPECT_EQ(loaded.encode("the lazy dog<|endoftext|>", SpecialTokens::kRecognize),
              direct.encode("the lazy dog<|endoftext|>", SpecialTokens::kRecognize));
  }
  nlohmann::json wrong = {{"model", {{"type", "WordPiece"}, {"vocab", {{"a", 0}}}}}};
  std::ofstream(folder / "tokenizer.json") << wrong.dump();
  EXPECT_THROW(Tokenizer::load(folder / "tokenizer.json"), Error);
  std::filesystem::remove_all(folder);
}

}  // namespace
}  // namespace zero::text
