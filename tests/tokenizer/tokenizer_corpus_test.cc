// Whole corpora (tiny shakespeare, WikiText-2 valid): round trip and ids equal to an independent
// reference (tests/golden/gpt2_tokenizer_reference.py: tiktoken when importable, else encoder.py's
// algorithm).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "../common/test_data.h"
#include "token_ids.h"
#include "zero/text/tokenizer.h"

namespace zero::text {
namespace {

std::string read_all(const std::filesystem::path& path) {
  std::ifstream stream(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << stream.rdbuf();
  return buffer.str();
}

// Runs the reference on `file` (whole, or line by line into `lines`); returns false (with the
// reason) when it is unavailable.
bool run_reference(const std::filesystem::path& file, bool by_line, std::vector<std::string>& lines,
                   std::string& why) {
  const char* python = std::getenv("ZERO_PYTHON");
  if (python == nullptr || *python == '\0') {
    why = "ZERO_PYTHON is not set";
    return false;
  }
  const auto out = testing::scratch_dir("tokenizer_reference") / "ids.txt";
  const std::string command = std::string(python) + " " + ZERO_GOLDEN_DIR +
                              "/gpt2_tokenizer_reference.py " + (by_line ? "--lines " : "") +
                              "--tokenizer_dir '" + (testing::shared_data_dir() / "gpt2").string() +
                              "' '" + file.string() + "' '" + out.string() + "'";
  const int status = std::system(command.c_str());
  if (status != 0) {
    why = "reference exited with status " + std::to_string(status) +
          " (needs python3-regex or tiktoken)";
    return false;
  }
  std::ifstream stream(out);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  std::filesystem::remove_all(out.parent_path());
  return true;
}

bool reference_ids(const std::filesystem::path& file, std::vector<TokenId>& ids, std::string& why) {
  std::vector<std::string> lines;
  if (!run_reference(file, false, lines, why)) return false;
  if (!lines.empty()) ids = parse_ids(lines.front());
  return true;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

// Every code point below U+3000 and every 16th one up to U+2FFFF (plus the ends of the range), each
// in contexts that exercise the pattern's branches: letters, digits, spaces, contractions.
TEST(UnicodeSweep, CategoriesSplitLikeTheReference) {
  ZERO_REQUIRE_SHARED_DATA("gpt2/encoder.json");
  std::vector<char32_t> code_points;
  for (char32_t c = 0; c < 0x30000; c += c < 0x3000 ? 1 : 16)
    if (c != '\n' && c != '\r' && (c < 0xD800 || c > 0xDFFF)) code_points.push_back(c);
  for (char32_t c : {0xE0001, 0xE0100, 0xF0000, 0x10FFFD}) code_points.push_back(c);
  std::string text;
  std::vector<std::string> lines;
  for (char32_t c : code_points) {
    std::string s;
    append_utf8(s, c);
    lines.push_back(" a" + s + "b " + s + "1 " + s + s + " 's" + s + "\t" + s + "  " + s);
    text += lines.back() + "\n";
  }
  text.pop_back();
  const auto path = testing::scratch_dir("unicode_sweep") / "sweep.txt";
  std::ofstream(path, std::ios::binary) << text;
  std::vector<std::string> expected;
  std::string why;
  if (!run_reference(path, true, expected, why)) GTEST_SKIP() << "reference unavailable: " << why;
  ASSERT_EQ(expected.size(), lines.size());
  const Tokenizer tokenizer = Tokenizer::load(testing::shared_data_dir() / "gpt2");
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (tokenizer.encode(lines[i]) != parse_ids(expected[i])) {
      if (++mismatches < 10)
        ADD_FAILURE() << "code point U+" << std::hex << static_cast<std::uint32_t>(code_points[i]);
    }
  }
  EXPECT_EQ(mismatches, 0u);
  std::filesystem::remove_all(path.parent_path());
}

class Corpus : public ::testing::TestWithParam<const char*> {};

TEST_P(Corpus, RoundTripsAndMatchesReference) {
  ZERO_REQUIRE_SHARED_DATA("gpt2/encoder.json");
  ZERO_REQUIRE_SHARED_DATA(GetParam());
  const auto path = testing::shared_data_dir() / GetParam();
  const Tokenizer tokenizer = Tokenizer::load(testing::shared_data_dir() / "gpt2");
  const std::string text = read_all(path);
  const std::vector<TokenId> ids = tokenizer.encode(text);
  ASSERT_EQ(tokenizer.decode(ids), text);
  std::vector<TokenId> expected;
  std::string why;
  if (!reference_ids(path, expected, why)) GTEST_SKIP() << "reference unavailable: " << why;
  ASSERT_EQ(ids.size(), expected.size());
  for (std::size_t i = 0; i < ids.size(); ++i)
    ASSERT_EQ(ids[i], expected[i]) << "first difference at token " << i;
}

INSTANTIATE_TEST_SUITE_P(Gpt2, Corpus,
                         ::testing::Values("tinyshakespeare/input.txt",
                                           "wikitext-2/wiki.valid.tokens"));

}  // namespace
}  // namespace zero::text
