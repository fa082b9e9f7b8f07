// Memory-mapped corpus files, binary detection, and the split into examples (lines or JSON lines).
#include "zero/text/text_files.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "utf8.h"
#include "zero/core/error.h"

namespace zero::text {

namespace fs = std::filesystem;

TextFormat format_of(const fs::path& path) {
  const std::string extension = path.extension().string();
  return extension == ".jsonl" || extension == ".json" ? TextFormat::kJsonLines
                                                       : TextFormat::kLines;
}

MappedFile::MappedFile(const fs::path& path) : path_(path) {
  ZERO_CHECK(fs::exists(path), "data file ", path, " does not exist");
  ZERO_CHECK(fs::is_regular_file(path), "data file ", path, " is not a regular file");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ZERO_CHECK(fd >= 0, "cannot open data file ", path, ": ", std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    const int error = errno;
    ::close(fd);
    ZERO_THROW("cannot stat data file ", path, ": ", std::strerror(error));
  }
  size_bytes_ = static_cast<std::size_t>(info.st_size);
  if (size_bytes_ == 0) {
    ::close(fd);
    ZERO_THROW("data file ", path, " is empty");
  }
  data_ = ::mmap(nullptr, size_bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
  const int error = errno;
  ::close(fd);
  if (data_ == MAP_FAILED) {
    data_ = nullptr;
    ZERO_THROW("cannot memory-map data file ", path, ": ", std::strerror(error));
  }
  ::madvise(data_, size_bytes_, MADV_SEQUENTIAL);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(data_, size_bytes_);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), data_(other.data_), size_bytes_(other.size_bytes_) {
  other.data_ = nullptr;
  other.size_bytes_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(data_, size_bytes_);
    path_ = std::move(other.path_);
    data_ = other.data_;
    size_bytes_ = other.size_bytes_;
    other.data_ = nullptr;
    other.size_bytes_ = 0;
  }
  return *this;
}

MappedFile open_text_file(const fs::path& path) {
  MappedFile file(path);
  constexpr std::size_t kSampleBytes = 64 * 1024;
  const std::string_view sample = file.bytes().substr(0, kSampleBytes);
  ZERO_CHECK(sample.find('\0') == std::string_view::npos, "data file ", path,
             " looks like a binary file (it has NUL bytes); expected UTF-8 text or JSON lines");
  const std::size_t bad = detail::first_invalid_utf8(sample);
  // A character cut by the end of the sample is not an error.
  const bool cut = sample.size() < file.size_bytes() && bad + 4 > sample.size();
  ZERO_CHECK(bad == sample.size() || cut, "data file ", path,
             " looks like a binary file: invalid UTF-8 at byte ", bad,
             "; expected UTF-8 text or JSON lines");
  return file;
}

namespace {

// datasets' text builder: the file is read with universal newlines ("\r\n" and "\r" become
// "\n") and split by StringIO.readlines(), which breaks at "\n" only, keeping it.
std::size_t for_each_line(std::string_view bytes,
                          const std::function<void(std::string_view)>& on_example) {
  std::size_t count = 0;
  std::size_t start = 0;
  std::string line;
  while (start < bytes.size()) {
    const std::size_t end = bytes.find_first_of("\r\n", start);
    if (end == std::string_view::npos) {
      on_example(bytes.substr(start));
      ++count;
      break;
    }
    if (bytes[end] == '\n') {
      on_example(bytes.substr(start, end + 1 - start));
      start = end + 1;
    } else {
      line.assign(bytes.substr(start, end - start));
      line.push_back('\n');
      on_example(line);
      start = end + (end + 1 < bytes.size() && bytes[end + 1] == '\n' ? 2 : 1);
    }
    ++count;
  }
  return count;
}

std::size_t for_each_json_line(std::string_view bytes, const fs::path& path,
                               const std::function<void(std::string_view)>& on_example,
                               std::size_t first_line_number) {
  return for_each_json_object(
      bytes, path,
      [&](const nlohmann::json& record, std::size_t line_number) {
        const auto text = record.find("text");
        ZERO_CHECK(text != record.end() && text->is_string(), path.string(), ":", line_number,
                   ": the JSON object has no string field \"text\"");
        on_example(text->get_ref<const std::string&>());
      },
      first_line_number);
}

}  // namespace

std::size_t for_each_json_object(
    std::string_view bytes, const fs::path& path,
    const std::function<void(const nlohmann::json& object, std::size_t line_number)>& on_object,
    std::size_t first_line_number) {
  std::size_t count = 0;
  std::size_t line_number = first_line_number - 1;
  std::size_t start = 0;
  while (start < bytes.size()) {
    std::size_t end = bytes.find('\n', start);
    if (end == std::string_view::npos) end = bytes.size();
    const std::string_view line = bytes.substr(start, end - start);
    start = end + 1;
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    nlohmann::json record;
    try {
      record = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& error) {
      ZERO_THROW(path.string(), ":", line_number, ": not a JSON object: ", error.what());
    }
    ZERO_CHECK(record.is_object(), path.string(), ":", line_number,
               ": not a JSON object: ", record.dump().substr(0, 80));
    on_object(record, line_number);
    ++count;
  }
  return count;
}

std::size_t for_each_example(std::string_view bytes, TextFormat format, const fs::path& path,
                             const std::function<void(std::string_view)>& on_example,
                             std::size_t first_line_number) {
  return format == TextFormat::kJsonLines
             ? for_each_json_line(bytes, path, on_example, first_line_number)
             : for_each_line(bytes, on_example);
}

}  // namespace zero::text
