// Reading corpora: checked, memory-mapped files split into examples as Hugging Face datasets does.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string_view>

namespace zero::text {

// How a file splits into examples (run_clm picks the datasets builder by extension the same way).
//   kLines:     datasets' "text" builder with keep_linebreaks=True (run_clm's default), as in
//               datasets 2.14+: the file is read with universal newlines ("\r\n" and "\r" become
//               "\n") and split at "\n" only (StringIO.readlines); each line, with its "\n", is one
//               example. (Older datasets split with str.splitlines, which also breaks at \v, \f,
//               \x1c-\x1e, U+0085, U+2028 and U+2029.)
//   kJsonLines: one JSON object per non-blank line; its "text" string is one example.
enum class TextFormat { kLines, kJsonLines };

// ".jsonl" and ".json" are JSON Lines; everything else (".txt", ".tokens", ...) is lines of text.
TextFormat format_of(const std::filesystem::path& path);

// A read-only memory map of a whole file. Throws zero::Error naming the file when it is missing,
// not a regular file, unreadable or empty.
class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::string_view bytes() const { return {static_cast<const char*>(data_), size_bytes_}; }
  std::size_t size_bytes() const { return size_bytes_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  void* data_ = nullptr;
  std::size_t size_bytes_ = 0;
};

// A corpus file: mapped and checked to be text (no NUL byte and valid UTF-8 in its first 64 KiB;
// otherwise zero::Error "... looks like a binary file").
MappedFile open_text_file(const std::filesystem::path& path);

// Calls on_example for each example of `bytes` (a file's content) in order. The view is valid
// only during the call. Returns the number of examples. `path` names the file in errors
// (a JSON line that does not parse or has no string "text" field: file:line, counting lines from
// `first_line_number` when `bytes` is a later chunk of the file).
std::size_t for_each_example(std::string_view bytes, TextFormat format,
                             const std::filesystem::path& path,
                             const std::function<void(std::string_view)>& on_example,
                             std::size_t first_line_number = 1);

// An example of `format` as datasets' "text" builder gives it with keep_linebreaks=False: a line
// without its "\n" (line.rstrip("\n")); with keep_linebreaks, or for JSON Lines, unchanged.
inline std::string_view without_linebreak(std::string_view example, TextFormat format,
                                          bool keep_linebreaks) {
  if (keep_linebreaks || format != TextFormat::kLines) return example;
  while (!example.empty() && example.back() == '\n') example.remove_suffix(1);
  return example;
}

// JSON Lines: calls on_object(object, line number) for each non-blank line of `bytes`, in order.
// Throws zero::Error "file:line: not a JSON object: ..." for a line that does not parse or is not
// an object. Returns the number of objects. Shared by run_clm's "text" examples (for_each_example)
// and the labelled data of text classification.
std::size_t for_each_json_object(
    std::string_view bytes, const std::filesystem::path& path,
    const std::function<void(const nlohmann::json& object, std::size_t line_number)>& on_object,
    std::size_t first_line_number = 1);

}  // namespace zero::text
