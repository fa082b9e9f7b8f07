// The GPT-2 demo's corpus: fortune files (strfile(1) format, examples separated by lines holding
// only "%") read into example texts.
#pragma once

#include <algorithm>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "zero/core/error.h"
#include "zero/text/text_files.h"

namespace demo {

// `spec` is a folder, whose regular files are read sorted by name (symbolic links, hidden files
// and fortune's index files *.dat skipped: the Debian package links each text as NAME.u8 and
// indexes it as NAME.dat), or a comma-separated list of files.
inline std::vector<std::filesystem::path> list_corpus_files(std::string_view spec) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  if (fs::is_directory(fs::path(spec))) {
    for (const fs::directory_entry& entry : fs::directory_iterator(fs::path(spec))) {
      const std::string name = entry.path().filename().string();
      if (entry.is_symlink() || !entry.is_regular_file() || name.starts_with(".") ||
          entry.path().extension() == ".dat")
        continue;
      files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    ZERO_CHECK(!files.empty(), "--corpus ", spec, ": the folder holds no text files");
    return files;
  }
  for (std::size_t begin = 0; begin <= spec.size();) {
    const std::size_t end = std::min(spec.find(',', begin), spec.size());
    if (end > begin) files.emplace_back(spec.substr(begin, end - begin));
    begin = end + 1;
  }
  ZERO_CHECK(!files.empty(), "--corpus: give a folder or comma-separated files");
  return files;
}

// Drops overstriking, the typewriter bold/underline some fortunes use: a backspace and the ASCII
// byte before it ("_\bx" and "x\bx" become "x").
inline std::string remove_overstrike(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c != '\b') {
      out.push_back(c);
    } else if (!out.empty() && static_cast<unsigned char>(out.back()) < 0x80) {
      out.pop_back();
    }
  }
  return out;
}

// Appends the examples of one file's text: the pieces between lines that hold only "%"; a file
// without such lines splits into paragraphs at blank lines. Pieces keep their line breaks; blank
// ones are dropped.
inline void append_examples(std::string_view text, std::vector<std::string>& examples) {
  auto is_blank = [](std::string_view line) {
    return line.find_first_not_of(" \t\r\n") == std::string_view::npos;
  };
  std::vector<std::string_view> lines;  // each with its "\n" (the last one may lack it)
  for (std::size_t begin = 0; begin < text.size();) {
    const std::size_t end = std::min(text.find('\n', begin), text.size() - 1) + 1;
    lines.push_back(text.substr(begin, end - begin));
    begin = end;
  }
  const bool fortune_format = std::any_of(lines.begin(), lines.end(), [](std::string_view line) {
    return line == "%\n" || line == "%\r\n" || line == "%";
  });
  std::string piece;
  auto flush = [&] {
    if (!is_blank(piece)) examples.push_back(remove_overstrike(piece));
    piece.clear();
  };
  for (const std::string_view line : lines) {
    const bool separator =
        fortune_format ? (line == "%\n" || line == "%\r\n" || line == "%") : is_blank(line);
    if (separator) {
      flush();
    } else {
      piece.append(line);
    }
  }
  flush();
}

// Every example of every file, in file order. Files are checked to be text (zero::Error naming a
// missing, empty or binary file).
inline std::vector<std::string> read_corpus(const std::vector<std::filesystem::path>& files) {
  std::vector<std::string> examples;
  for (const std::filesystem::path& file : files) {
    const zero::text::MappedFile mapped = zero::text::open_text_file(file);
    append_examples(mapped.bytes(), examples);
  }
  return examples;
}

}  // namespace demo
