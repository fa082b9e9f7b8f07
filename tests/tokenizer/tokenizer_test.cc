// GPT-2 tokenizer: known ids, 458 edge cases with tiktoken's ids, loaders, merge paths, UTF-8
// repair.
#include "zero/text/tokenizer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "../common/test_data.h"
#include "zero/core/error.h"

namespace zero::text {
namespace {

const Tokenizer& gpt2() {
  static const Tokenizer tokenizer = Tokenizer::load(testing::shared_data_dir() / "gpt2");
  return tokenizer;
}

std::string from_hex(const std::string& hex) {
  std::string bytes;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return bytes;
}

std::string python_replace(std::string_view text) {
  std::string storage;
  return std::string(replace_invalid_utf8(text, storage));
}

TEST(Tokenizer, KnownPairs) {
  ZERO_REQUIRE_SHARED_DATA("gpt2/encoder.json");
  EXPECT_EQ(gpt2().encode("hello world"), (std::vector<TokenId>{31373, 995}));
  EXPECT_EQ(gpt2().encode("This is some text"), (std::vector<TokenId>{1212, 318, 617, 2420}));
  EXPECT_EQ(gpt2().encode(" "), (std::vector<TokenId>{220}));
  EXPECT_EQ(gpt2().encode("\t"), (std::vector<TokenId>{197}));
  EXPECT_EQ(gpt2().encode("indivisible"), (std::vector<TokenId>{521, 452, 12843}));
  EXPECT_EQ(gpt2().encode("hello 👋 world 🌍"),
            (std::vector<TokenId>{31373, 50169, 233, 995, 12520, 234, 235}));
  EXPECT_EQ(gpt2().encode("hello <|endoftext|>", SpecialTokens::kRecognize),
            (std::vector<TokenId>{31373, 220, 50256}));
  EXPECT_EQ(gpt2().end_of_text_id(), 50256u);
  EXPECT_EQ(gpt2().vocab_size(), 50257u);
  EXPECT_TRUE(gpt2().encode("").empty());
}

TEST(Tokenizer, EdgeCasesMatchTiktoken) {
  ZERO_REQUIRE_SHARED_DATA("gpt2/encoder.json");
  std::ifstream stream(std::string(ZERO_TOKENIZER_TEST_DIR) + "/gpt2_edge_cases.json");
  ASSERT_TRUE(stream.good());
  const auto document = nlohmann::json::parse(stream);
  std::size_t checked = 0;
  for (const auto& item : document["cases"]) {
    const std::string text = from_hex(item["hex"].get<std::string>());
    const auto expected = item["ids"].get<std::vector<TokenId>>();
    const auto expected_special = item["special_ids"].get<std::vector<TokenId>>();
    EXPECT_EQ(gpt2().encode(text), expected) << "input hex " << item["hex"];
    EXPECT_EQ(gpt2().encode(text, SpecialTokens::kRecognize), expected_special)
        << "input hex " << item["hex"];
    EXPECT_EQ(gpt2().decode(expected), python_replace(text));
    ++checked;
  }
  EXPECT_GE(checked, 400u);
}

TEST(Tokenizer, ThreeFileFormatsAgree) {
  ZERO_REQUIRE_SHARED_DATA("gpt2/tokenizer.json");
  const auto folder = testing::shared_data_dir() / "gpt2";
  const Tokenizer openai =
      Tokenizer::from_vocab_and_merges(folder / "encoder.json", folder / "vocab.bpe");
  const Tokenizer hugging_face =
      Tokenizer::from_vocab_and_merges(folder / "vocab.json", folder / "merges.txt");
  const Tokenizer json_file = Tokenizer::from_tokenizer_json(folder / "tokenizer.json");
  EXPECT_EQ(openai.fingerprint(), hugging_face.fingerprint());
  EXPECT_EQ(openai.fingerprint(), json_file.fingerprint());
  EXPECT_EQ(json_file.end_of_text_id(), 50256u);
  const std::string text = "Hello, world! It's 2024 <|endoftext|> naïve café 🙂";
  EXPECT_EQ(openai.encode(text, SpecialTokens::kRecognize),
            json_file.encode(text, SpecialTokens::kRecognize));
}

TEST(Tokenizer, ShortAndHeapMergesAgree) {
  ZERO_REQUIRE_SHARED_DATA("gpt2/encoder.json");
  std::mt19937 rng(7);
  const std::string letters = "etaoinshrdlucmfwypvbgkjqxz";
  for (int trial = 0; trial < 2000; ++trial) {
    std::string piece = trial % 2 ? " " : "";
    const int length = 1 + static_cast<int>(rng() % 60);
    for (int i = 0; i < length; ++i) piece.push_back(letters[rng() % (trial % 3 ? 26 : 4)]);
    std::vector<TokenId> scan, heap;
    gpt2().encode_piece_uncached(piece, scan, false);
    gpt2().encode_piece_uncached(piece, heap, true);
    ASSERT_EQ(scan, heap) << piece;
    ASSERT_EQ(gpt2().decode(scan), piece);
  }
}

TEST(Tokenizer, VeryLongWordsRoundTrip) {
  ZERO_REQUIRE_SHARED_DATA("gpt2/encoder.json");
  for (const std::string& text : {std::string(1 << 20, 'a'), std::string(1 << 20, ' '),
                                  std::string(300000, '\n') + "x", std::string(200000, '7')}) {
    const auto ids = gpt2().encode(text);
    EXPECT_EQ(gpt2().decode(ids), text);
    EXPECT_LE(ids.size(), text.size());
  }
}

TEST(Tokenizer, CacheDoesNotChangeIds) {
  ZERO_REQUIRE_SHARED_DATA("gpt2/encoder.json");
  const std::string text = "the cat and the hat and the bat, the cat again";
  const auto first = gpt2().encode(text);
  EXPECT_EQ(gpt2().encode(text), first);
  const Tokenizer second_instance = Tokenizer::load(testing::shared_data_dir() / "gpt2");
  EXPECT_EQ(second_instance.encode(text), first);
  EXPECT_EQ(gpt2().encode(text), first);
}

TEST(Tokenizer, DecodeRejectsUnknownIds) {
  ZERO_REQUIRE_SHARED_DATA("gpt2/encoder.json");
  EXPECT_THROW(gpt2().decode(std::vector<TokenId>{50257}), Error);
  EXPECT_EQ(gpt2().decode(std::vector<TokenId>{50256}), "<|endoftext|>");
}

TEST(ByteLevel, MapMatchesEncoderPy) {
  EXPECT_EQ(byte_to_unicode('!'), U'!');
  EXPECT_EQ(byte_to_unicode(' '), U'\u0120');   // "Ġ"
  EXPECT_EQ(byte_to_unicode('\n'), U'\u010A');  // "Ċ"
  EXPECT_EQ(byte_to_unicode(0), U'\u0100');
  EXPECT_EQ(byte_to_unicode(0xAD), U'\u0143');
  std::string all;
  for (int byte = 0; byte < 256; ++byte) all.push_back(static_cast<char>(byte));
  EXPECT_EQ(unicode_string_to_bytes(bytes_to_unicode_string(all)), all);
  EXPECT_THROW(unicode_string_to_bytes("\u4e2d"), Error);
}

TEST(Utf8, ReplacementFollowsPython) {
  // bytes.decode("utf-8", "replace") results, one U+FFFD per maximal subpart.
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(python_replace("abc"), "abc");
  EXPECT_EQ(python_replace("\xff"), r);
  EXPECT_EQ(python_replace("\xe2\x82"), r);
  EXPECT_EQ(python_replace("\xe2\x82x"), r + "x");
  EXPECT_EQ(python_replace("\xed\xa0\x80"), r + r + r);
  EXPECT_EQ(python_replace("\xf0\x9f\x98"), r);
  EXPECT_EQ(python_replace("\xf4\x90\x80\x80"), r + r + r + r);
  EXPECT_EQ(python_replace("\xc0\xaf"), r + r);
  EXPECT_EQ(python_replace("\xe0\x80\xaf"), r + r + r);
  EXPECT_EQ(python_replace("\xc3\xa9\xc3"), "\xc3\xa9" + r);
}

TEST(Loader, ErrorsNameTheFile) {
  const auto folder = testing::scratch_dir("tokenizer_loader");
  try {
    Tokenizer::load(folder);
    FAIL();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(folder.string()), std::string::npos);
  }
  std::ofstream(folder / "vocab.json") << "{\"a\": 0, \"b\": 7}";
  std::ofstream(folder / "merges.txt") << "#version: 0.2\na b\n";
  try {
    Tokenizer::load(folder);
    FAIL();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("vocab.json"), std::string::npos) << error.what();
  }
  std::filesystem::remove_all(folder);
}

// Found by tests/fuzz (findings/tokenizer_json/): a field of the wrong type or missing escaped as
// nlohmann::json's exception instead of an error naming the file.
TEST(Loader, MalformedTokenizerJsonFieldsNameTheFile) {
  const auto folder = testing::scratch_dir("tokenizer_json_fields");
  const std::string model = R"("model": {"type": "BPE", "vocab": {"a": 0}, "merges": [)";
  for (const std::string& text :
       {R"({"added_tokens": [{"id": 1}], )" + model + "]}}",
        R"({"added_tokens": [{"content": 5, "id": 1}], )" + model + "]}}",
        "{" + model + "[1, 2]]}}",
        std::string(R"({"model": {"type": null, "vocab": {}, "merges": []}})")}) {
    std::ofstream(folder / "tokenizer.json") << text;
    try {
      Tokenizer::from_tokenizer_json(folder / "tokenizer.json");
      ADD_FAILURE() << "no error for " << text;
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("tokenizer.json"), std::string::npos)
          << error.what();
    }
  }
  std::filesystem::remove_all(folder);
}

}  // namespace
}  // namespace zero::text
