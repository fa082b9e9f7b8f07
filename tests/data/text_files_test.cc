// Corpus files: examples split as Hugging Face datasets does, JSON lines, and bad-input errors.
#include "zero/text/text_files.h"

#include <gtest/gtest.h>

#include <fstream>

#include "../common/test_data.h"
#include "zero/core/error.h"

namespace zero::text {
namespace {

std::vector<std::string> examples(std::string_view bytes, TextFormat format) {
  std::vector<std::string> out;
  for_each_example(bytes, format, "test", [&](std::string_view e) { out.emplace_back(e); });
  return out;
}

void write(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& error) {
    return error.what();
  }
  return "no error";
}

TEST(TextFiles, LinesKeepTheirBreaksLikeSplitlines) {
  using V = std::vector<std::string>;
  EXPECT_EQ(examples("a\nb\n", TextFormat::kLines), (V{"a\n", "b\n"}));
  EXPECT_EQ(examples("a\nb", TextFormat::kLines), (V{"a\n", "b"}));
  EXPECT_EQ(examples("a\n\n\nb\n", TextFormat::kLines), (V{"a\n", "\n", "\n", "b\n"}));
  // universal newlines: \r\n and \r read as \n
  EXPECT_EQ(examples("a\r\nb\rc", TextFormat::kLines), (V{"a\n", "b\n", "c"}));
  // only "\n" (and "\r", "\r\n" read as "\n") end a line, as in datasets' StringIO.readlines
  EXPECT_EQ(examples("a\vb\fc\x1c"
                     "d\n",
                     TextFormat::kLines),
            (V{"a\vb\fc\x1c"
               "d\n"}));
  EXPECT_EQ(examples("a\xc2\x85"
                     "b\xe2\x80\xa8"
                     "c\n\r",
                     TextFormat::kLines),
            (V{"a\xc2\x85"
               "b\xe2\x80\xa8"
               "c\n",
               "\n"}));
  EXPECT_EQ(examples("\r\r\n\n", TextFormat::kLines), (V{"\n", "\n", "\n"}));
  EXPECT_EQ(examples("caf\xc3\xa9\n", TextFormat::kLines), (V{"caf\xc3\xa9\n"}));
  EXPECT_TRUE(examples("", TextFormat::kLines).empty());
}

TEST(TextFiles, JsonLinesTakeTheTextField) {
  using V = std::vector<std::string>;
  EXPECT_EQ(
      examples("{\"text\": \"a\\nb\"}\n\n{\"text\": \"c\", \"id\": 1}\n", TextFormat::kJsonLines),
      (V{"a\nb", "c"}));
  EXPECT_NE(error_of([] { examples("{\"text\": 1}\n", TextFormat::kJsonLines); }).find("test:1"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              examples("{\"a\": \"x\"}\nnot json\n", TextFormat::kJsonLines);
            }).find("test:1"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              examples("{\"text\": \"x\"}\nnot json\n", TextFormat::kJsonLines);
            }).find("test:2"),
            std::string::npos);
  std::string_view later = "{\"text\": \"x\"}\n[1]\n";
  EXPECT_NE(error_of([&] {
              for_each_example(
                  later, TextFormat::kJsonLines, "f", [](auto) {}, 41);
            }).find("f:42"),
            std::string::npos);
  EXPECT_EQ(format_of("a/b.jsonl"), TextFormat::kJsonLines);
  EXPECT_EQ(format_of("a/b.txt"), TextFormat::kLines);
  EXPECT_EQ(format_of("wiki.valid.tokens"), TextFormat::kLines);
}

TEST(TextFiles, BadFilesAreClearErrors) {
  const auto folder = testing::scratch_dir("text_files");
  const auto missing = folder / "missing.txt";
  EXPECT_NE(error_of([&] { open_text_file(missing); }).find("does not exist"), std::string::npos);
  EXPECT_NE(error_of([&] { open_text_file(missing); }).find(missing.string()), std::string::npos);
  write(folder / "empty.txt", "");
  EXPECT_NE(error_of([&] { open_text_file(folder / "empty.txt"); }).find("is empty"),
            std::string::npos);
  write(folder / "binary.txt", std::string("\x7f"
                                           "ELF\x02\x01\x01\x00\x00",
                                           9));
  EXPECT_NE(error_of([&] { open_text_file(folder / "binary.txt"); }).find("binary"),
            std::string::npos);
  write(folder / "latin1.txt", "caf\xe9 au lait\n");
  EXPECT_NE(error_of([&] { open_text_file(folder / "latin1.txt"); }).find("binary"),
            std::string::npos);
  EXPECT_NE(error_of([&] { open_text_file(folder); }).find("not a regular file"),
            std::string::npos);
  write(folder / "good.txt", "hello\n");
  EXPECT_EQ(open_text_file(folder / "good.txt").bytes(), "hello\n");
  std::filesystem::remove_all(folder);
}

}  // namespace
}  // namespace zero::text
