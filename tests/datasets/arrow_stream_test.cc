// text::for_each_arrow_text over Arrow streams HF datasets wrote (fixtures/make_fixtures.py):
// the texts datasets reads back (fixtures/expected.json), shards and record batches, nulls,
// large_string; every truncation an error; the streams zero refuses, each named.
#include "zero/text/arrow_stream.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "../common/test_data.h"
#include "zero/core/error.h"

namespace zero::text {
namespace {

namespace fs = std::filesystem;

const fs::path kFixtures = ZERO_ARROW_FIXTURES;

// The .arrow files of `config`'s prepared folder for `split`, in shard order.
std::vector<fs::path> split_files(const std::string& config, const std::string& split) {
  std::vector<fs::path> files;
  for (const auto& entry :
       fs::recursive_directory_iterator(kFixtures / "cache" / "tiny_corpus" / config)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("tiny_corpus-" + split + ".") ||
        name.starts_with("tiny_corpus-" + split + "-"))
      files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string error_of(const std::string& bytes, const fs::path& path = "stream.arrow") {
  return zero::testing::error_of(
      [&] { for_each_arrow_text(bytes, path, [](std::string_view) {}); });
}

TEST(ArrowStream, ReadsTheTextsDatasetsReadsBackFromItsCache) {
  std::ifstream in(kFixtures / "expected.json");
  const nlohmann::json expected = nlohmann::json::parse(in);
  std::size_t splits = 0;
  for (const auto& [config, by_split] : expected.items()) {
    for (const auto& [split, rows] : by_split.items()) {
      std::vector<std::string> texts;
      std::vector<std::string> columns;
      std::size_t num_rows = 0;
      std::size_t num_nulls = 0;
      const std::vector<fs::path> files = split_files(config, split);
      ASSERT_FALSE(files.empty()) << config << "/" << split;
      for (const fs::path& file : files) {
        const ArrowTextColumn column =
            for_each_arrow_text(file, [&](std::string_view text) { texts.emplace_back(text); });
        columns.push_back(column.name);
        num_rows += column.num_rows;
        num_nulls += column.num_nulls;
      }
      std::vector<std::string> wanted;  // datasets' values, nulls left out
      for (const nlohmann::json& row : rows)
        if (!row.is_null()) wanted.push_back(row.get<std::string>());
      EXPECT_EQ(texts, wanted) << config << "/" << split;
      EXPECT_EQ(num_rows, rows.size()) << config << "/" << split;
      EXPECT_EQ(num_nulls, rows.size() - wanted.size()) << config << "/" << split;
      for (const std::string& name : columns) EXPECT_EQ(name, "text");
      ++splits;
    }
  }
  EXPECT_EQ(splits, 4u) << "raw-v1 train/validation, large train/test";
  EXPECT_EQ(split_files("raw-v1", "train").size(), 2u) << "the train split is in two shards";
}

TEST(ArrowStream, EveryTruncationIsAnErrorNamingTheFile) {
  for (const fs::path& file :
       {split_files("raw-v1", "train").front(), split_files("large", "train").front()}) {
    const std::string bytes = zero::testing::read_bytes(file);
    for (std::size_t size = 0; size < bytes.size(); ++size) {
      const std::string message = error_of(bytes.substr(0, size), file);
      ASSERT_NE(message.find(file.string()), std::string::npos)
          << file << " cut at " << size << " of " << bytes.size() << ": '" << message << "'";
    }
  }
}

// Every byte changed in turn: an error or a read, never a crash (the sanitizer builds run this).
TEST(ArrowStream, ACorruptByteNeverCrashes) {
  const std::string bytes = zero::testing::read_bytes(split_files("raw-v1", "train").front());
  std::size_t errors = 0;
  for (std::size_t at = 0; at < bytes.size(); ++at)
    for (const unsigned char value : {0x00, 0x7f, 0xff}) {
      std::string corrupt = bytes;
      if (static_cast<unsigned char>(corrupt[at]) == value) continue;
      corrupt[at] = static_cast<char>(value);
      const bool caught = !error_of(corrupt).empty();
      errors += caught ? 1 : 0;
      // The first message's framing: its continuation marker and metadata length.
      if (at < 8) {
        EXPECT_TRUE(caught) << "byte " << at << " set to " << int{value};
      }
    }
  EXPECT_GT(errors, 0u);
}

TEST(ArrowStream, RefusesWhatItDoesNotReadNamingIt) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"compressed.arrow", "body is compressed"},
      {"dictionary.arrow", "column 'text' is dictionary-encoded"},
      {"dictionary_batch.arrow", "column 'label' is dictionary-encoded"},
      {"int_text.arrow",
       "column 'text' (run_clm's text column: \"text\", else the first) is of "
       "type int; zero reads string or large_string"},
      {"file_format.arrow", "an Arrow IPC file (ARROW1 magic)"},
  };
  for (const auto& [name, wanted] : cases) {
    const fs::path path = kFixtures / "refused" / name;
    const std::string message = error_of(zero::testing::read_bytes(path), path);
    EXPECT_NE(message.find(wanted), std::string::npos) << name << ": " << message;
    EXPECT_NE(message.find(path.string()), std::string::npos) << name << ": " << message;
  }
  EXPECT_NE(error_of("").find("truncated"), std::string::npos);
}

}  // namespace
}  // namespace zero::text
