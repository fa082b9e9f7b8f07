// text::for_each_arrow_text over Arrow streams HF datasets wrote (fixtures/make_fixtures.py):
// the texts datasets reads back (fixtures/expected.json), shards and record batches, nulls,
// large_string; every truncation an error; the streams zero refuses, each named.
#include "zero/text/arrow_stream.h"

#include <flatbuffers/flatbuffers.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
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

// One encapsulated message built with flatbuffers' builder: Message { version, header_type,
// header: a Schema of one "text" string column (endianness `endianness`) or an empty table,
// bodyLength 0 }, framed as Arrow frames it.
std::string message(std::uint8_t header_type, std::int16_t endianness = 0,
                    std::int16_t version = 4) {
  namespace fb = flatbuffers;
  fb::FlatBufferBuilder builder;
  fb::uoffset_t header = 0;
  if (header_type == 1) {
    const fb::Offset<fb::String> name = builder.CreateString("text");
    const fb::uoffset_t utf8 = builder.EndTable(builder.StartTable());
    const fb::uoffset_t field_start = builder.StartTable();
    builder.AddOffset(4, name);                          // Field.name
    builder.AddElement<std::uint8_t>(8, 5, 0);           // Field.type_type: Utf8
    builder.AddOffset(10, fb::Offset<fb::Table>(utf8));  // Field.type
    const fb::Offset<fb::Table> field(builder.EndTable(field_start));
    const auto fields = builder.CreateVector(std::vector<fb::Offset<fb::Table>>{field});
    const fb::uoffset_t schema_start = builder.StartTable();
    builder.AddElement<std::int16_t>(4, endianness, 0);  // Schema.endianness
    builder.AddOffset(6, fields);                        // Schema.fields
    header = builder.EndTable(schema_start);
  } else {
    header = builder.EndTable(builder.StartTable());
  }
  const fb::uoffset_t message_start = builder.StartTable();
  builder.AddElement<std::int16_t>(4, version, 0);      // Message.version
  builder.AddElement<std::uint8_t>(6, header_type, 0);  // Message.header_type
  builder.AddOffset(8, fb::Offset<fb::Table>(header));  // Message.header
  builder.AddElement<std::int64_t>(10, 0, 0);           // Message.bodyLength
  builder.Finish(fb::Offset<fb::Table>(builder.EndTable(message_start)));
  std::string metadata(reinterpret_cast<const char*>(builder.GetBufferPointer()),
                       builder.GetSize());
  metadata.resize((metadata.size() + 7) / 8 * 8, '\0');
  const std::int32_t framing[2] = {-1, static_cast<std::int32_t>(metadata.size())};
  return std::string(reinterpret_cast<const char*>(framing), 8) + metadata;
}

const std::string kEndOfStream("\xff\xff\xff\xff\0\0\0\0", 8);

TEST(ArrowStream, RefusesBigEndianDataAndMessagesItDoesNotRead) {
  ASSERT_EQ(error_of(message(1) + kEndOfStream), "") << "the built schema alone reads";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {message(1, /*endianness=*/1) + kEndOfStream, "big-endian data"},
      {message(1) + message(2) + kEndOfStream, "a dictionary batch"},
      {message(1) + message(1) + kEndOfStream, "a second schema message"},
      {message(1) + message(4) + kEndOfStream, "(tensor or unknown)"},
      {message(1, 0, /*version=*/2) + kEndOfStream, "metadata version 3, older than"},
      {message(3) + kEndOfStream, "does not start with a schema"},
      {message(1), "end-of-stream marker"},
  };
  for (const auto& [stream, wanted] : cases) {
    const std::string error = error_of(stream, "built.arrow");
    EXPECT_NE(error.find(wanted), std::string::npos) << wanted << ": " << error;
    EXPECT_NE(error.find("built.arrow"), std::string::npos) << error;
  }
}

}  // namespace
}  // namespace zero::text
