// Blocks identical to run_clm.py's (Hugging Face datasets + tokenizers, when pip has them).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include "../common/test_data.h"
#include "zero/text/lm_dataset.h"

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

std::string reference_blocks(const fs::path& file, int percent, std::size_t block_size,
                             std::string& why) {
  const char* python = std::getenv("ZERO_PYTHON");
  if (python == nullptr || *python == '\0') {
    why = "ZERO_PYTHON is not set";
    return {};
  }
  const fs::path out = file.parent_path() / "reference.txt";
  const std::string command = std::string(python) + " " + ZERO_GOLDEN_DIR +
                              "/run_clm_blocks_reference.py '" + file.string() + "' '" +
                              (testing::shared_data_dir() / "gpt2").string() + "' " +
                              std::to_string(percent) + " " + std::to_string(block_size) + " '" +
                              out.string() + "' 2>/dev/null";
  if (std::system(command.c_str()) != 0) {
    why = "the reference needs pip's datasets and tokenizers";
    return {};
  }
  std::ifstream stream(out);
  std::ostringstream buffer;
  buffer << stream.rdbuf();
  return buffer.str();
}

std::string our_blocks(const fs::path& file, int percent, std::size_t block_size) {
  DataArguments arguments;
  arguments.train_files = {file};
  arguments.validation_split_percentage = percent;
  arguments.block_size = block_size;
  arguments.tokenize.show_progress = false;
  const LmDatasets datasets =
      load_lm_datasets(Tokenizer::load(testing::shared_data_dir() / "gpt2"), arguments);
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
    const std::string expected = reference_blocks(file, percent, block_size, why);
    if (expected.empty()) GTEST_SKIP() << "reference unavailable: " << why;
    EXPECT_TRUE(our_blocks(file, percent, block_size) == expected)
        << "blocks differ from run_clm's at percent " << percent << ", block_size " << block_size;
  }
  fs::remove_all(folder);
}

}  // namespace
}  // namespace zero::text
