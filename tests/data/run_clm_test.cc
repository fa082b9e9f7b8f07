// Blocks identical to run_clm.py's (Hugging Face datasets + transformers, when pip has them): with
// GPT-2's tokenizer, and with Llama-family tokenizer.json files whose template adds bos (and eos)
// to every text, as run_clm's `tokenizer(examples["text"])` does.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include "../common/test_data.h"
#include "zero/text/lm_dataset.h"
#include "zero/text/streaming.h"

namespace zero::text {
namespace {

namespace fs = std::filesystem;

// Lines with CR, CRLF, odd separators, special tokens, blank runs, unicode.
std::string mixed_text() {
  const std::vector<std::string> parts = {"Hello world\r\n",
                                          "a\rb\n",
                                          "x\vy\fz\n",
                                          "tab\tline\x1cmore\x1d\n",
                                          "uni\u2028sep\u2029end\u0085!\n",
                                          "<|endoftext|>doc two\n",
                                          "\n",
                                          "\n\n",
                                          "  spaces  \n",
                                          "na\u00efve caf\u00e9 \U0001F642\n",
                                          "12345 678\n"};
  std::mt19937 rng(5);
  std::string text;
  for (int i = 0; i < 20000; ++i) text += parts[rng() % parts.size()];
  return text;
}

std::string reference_blocks(const fs::path& file, const fs::path& tokenizer_dir, int percent,
                             std::size_t block_size, std::string& why) {
  const char* python = std::getenv("ZERO_PYTHON");
  if (python == nullptr || *python == '\0') {
    why = "ZERO_PYTHON is not set";
    return {};
  }
  const fs::path out = file.parent_path() / "reference.txt";
  const std::string command = std::string(python) + " " + ZERO_GOLDEN_DIR +
                              "/run_clm_blocks_reference.py '" + file.string() + "' '" +
                              tokenizer_dir.string() + "' " + std::to_string(percent) + " " +
                              std::to_string(block_size) + " '" + out.string() + "' 2>/dev/null";
  if (std::system(command.c_str()) != 0) {
    why = "the reference needs pip's datasets and transformers";
    return {};
  }
  std::ifstream stream(out);
  std::ostringstream buffer;
  buffer << stream.rdbuf();
  return buffer.str();
}

// `cache_dir` empty: no token cache.
std::string our_blocks(const fs::path& file, const Tokenizer& tokenizer, int percent,
                       std::size_t block_size, const fs::path& cache_dir = {}) {
  DataArguments arguments;
  arguments.train_files = {file};
  arguments.validation_split_percentage = percent;
  arguments.block_size = block_size;
  arguments.cache_dir = cache_dir;
  arguments.tokenize.show_progress = false;
  const LmDatasets datasets = load_lm_datasets(tokenizer, arguments);
  std::ostringstream out;
  for (const auto& [name, blocks] :
       {std::pair{"validation", &datasets.validation}, std::pair{"train", &datasets.train}}) {
    out << name << " " << blocks->size() << "\n";
    for (std::size_t b = 0; b < blocks->size(); ++b) {
      const auto ids = blocks->block(b);
      for (std::size_t i = 0; i < ids.size(); ++i) out << (i ? " " : "") << ids[i];
      out << "\n";
    }
  }
  return out.str();
}

TEST(RunClm, BlocksEqualHuggingFaceDatasets) {
  ZERO_REQUIRE_SHARED_DATA("gpt2/tokenizer.json");
  const fs::path folder = testing::scratch_dir("run_clm");
  const fs::path file = folder / "mixed.txt";
  std::ofstream(file, std::ios::binary) << mixed_text();
  for (const auto& [percent, block_size] :
       {std::pair{5, std::size_t{64}}, std::pair{33, std::size_t{256}}}) {
    std::string why;
    const std::string expected =
        reference_blocks(file, testing::shared_data_dir() / "gpt2", percent, block_size, why);
    if (expected.empty()) GTEST_SKIP() << "reference unavailable: " << why;
    EXPECT_TRUE(our_blocks(file, Tokenizer::load(testing::shared_data_dir() / "gpt2"), percent,
                           block_size) == expected)
        << "blocks differ from run_clm's at percent " << percent << ", block_size " << block_size;
  }
  fs::remove_all(folder);
}

// The blocks of `--streaming` (percent 0: no validation split), as the reference's file writes
// them.
std::string streamed_blocks(const fs::path& file, const Tokenizer& tokenizer,
                            std::size_t block_size) {
  StreamingBlocks blocks({file}, tokenizer, block_size);
  std::ostringstream body;
  std::size_t count = 0;
  for (std::vector<TokenId> block; blocks.next(block); ++count) {
    for (std::size_t i = 0; i < block.size(); ++i) body << (i ? " " : "") << block[i];
    body << "\n";
  }
  return "validation 0\ntrain " + std::to_string(count) + "\n" + body.str();
}

// Llama 3's, Llama 2's and Mistral's tokenizer.json forms (tests/golden/run_clm_tokenizers.py,
// trained on the text itself): each example (a line) gets the template's bos (Mistral's eos too)
// before group_texts, in memory, through the token cache written and read back, and streamed.
TEST(RunClm, BlocksWithTheTemplatesSpecialTokensEqualHuggingFace) {
  const char* python = std::getenv("ZERO_PYTHON");
  if (python == nullptr || *python == '\0') GTEST_SKIP() << "ZERO_PYTHON is not set";
  const fs::path folder = testing::scratch_dir("run_clm_llama");
  const fs::path file = folder / "mixed.txt";
  std::ofstream(file, std::ios::binary) << mixed_text() << "<s>a line</s> with <|begin_of_text|>";
  const std::string command = std::string(python) + " " + ZERO_GOLDEN_DIR +
                              "/run_clm_tokenizers.py '" + folder.string() + "' '" + file.string() +
                              "' 2>&1";
  const int status = std::system(command.c_str());
  if (WIFEXITED(status) && WEXITSTATUS(status) == 3)
    GTEST_SKIP() << "the Python at ZERO_PYTHON cannot import tokenizers";
  ASSERT_EQ(status, 0) << command;
  for (const char* name : {"llama3", "llama2", "mistral"}) {
    const Tokenizer tokenizer = Tokenizer::load(folder / name);
    ASSERT_FALSE(tokenizer.sequence_template().before.empty()) << name;
    for (const auto& [percent, block_size] :
         {std::pair{5, std::size_t{64}}, std::pair{0, std::size_t{200}}}) {
      std::string why;
      const std::string expected = reference_blocks(file, folder / name, percent, block_size, why);
      if (expected.empty()) GTEST_SKIP() << "reference unavailable: " << why;
      const fs::path cache = folder / "cache";
      for (int pass = 0; pass < 2; ++pass)  // writes the token cache, then reads it
        EXPECT_TRUE(our_blocks(file, tokenizer, percent, block_size, cache) == expected)
            << name << ": blocks differ from run_clm's at percent " << percent << ", block_size "
            << block_size << " (pass " << pass << ")";
      if (percent == 0) {
        EXPECT_TRUE(streamed_blocks(file, tokenizer, block_size) == expected)
            << name << ": --streaming blocks differ from run_clm's";
      }
    }
  }
  fs::remove_all(folder);
}

}  // namespace
}  // namespace zero::text
