// Helpers of the fuzz harnesses: each harness is one LLVMFuzzerTestOneInput that feeds bytes to a
// reader of outside bytes and catches only zero::Error (anything else escaping, a crash, a leak,
// undefined behaviour, a hang or an allocation over the limit is a finding). Readers that take a
// path get the bytes written to a file in a private scratch folder first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>

namespace zero::fuzz {

// A folder of this process (under /dev/shm when present), created once, emptied per call to
// fresh_folder(). Removed at exit.
std::filesystem::path scratch_folder();
// scratch_folder()/run: an empty folder for one input.
std::filesystem::path fresh_folder();
// Writes `bytes` to `path` (whole file, truncating).
void write_bytes(const std::filesystem::path& path, std::string_view bytes);

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Splits at the first NUL byte: (before, after); after is empty when there is none. Harnesses that
// need two files take them this way (JSON and text files hold no NUL, so seeds stay readable).
inline std::pair<std::string_view, std::string_view> split_at_nul(std::string_view bytes) {
  const std::size_t at = bytes.find('\0');
  if (at == std::string_view::npos) return {bytes, {}};
  return {bytes.substr(0, at), bytes.substr(at + 1)};
}

}  // namespace zero::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
