// Whole corpora (tiny shakespeare, WikiText-2 valid): round trip and ids equal to an independent
// reference (tests/golden/gpt2_reference.py: tiktoken when importable, else encoder.py's algorithm).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "../common/test_data.h"
#include "zero/text/tokenizer.h"

namespace zero::text {
namespace {

std::string read_all(const std::filesystem::path& path) {
  std::ifstream stream(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << stream.rdbuf();
  return buffer.str();
}

// Runs the reference on `file`; returns false (with the reason) when it is unavailable.
bool reference_ids(const std::filesystem::path& file, std::vector<TokenId>& ids, std::string& why) {
  const char* python = std::getenv("ZERO_PYTHON");
  if (python == nullptr || *python == '\0') {
    why = "ZERO_PYTHON is not set";
    return false;
  }
  const auto out = testing::scratch_dir("tokenizer_reference") / "ids.txt";
  const std::string command = std::string(python) + " " + ZERO_GOLDEN_DIR +
                              "/gpt2_reference.py --tokenizer_dir '" +
                              (testing::shared_data_dir() / "gpt2").string() + "' '" +
                              file.string() + "' '" + out.string() + "'";
  const int status = std::system(command.c_str());
  if (status != 0) {
    why = "reference exited with status " + std::to_string(status) +
          " (needs python3-regex or tiktoken)";
    return false;
  }
  std::ifstream stream(out);
  TokenId id;
  while (stream >> id) ids.push_back(id);
  std::filesystem::remove_all(out.parent_path());
  return true;
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
