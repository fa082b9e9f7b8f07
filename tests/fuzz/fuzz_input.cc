// Scratch files of the fuzz harnesses (fuzz_input.h).
#include "fuzz_input.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <system_error>

namespace zero::fuzz {

namespace {

void remove_scratch() {
  std::error_code ignored;
  std::filesystem::remove_all(scratch_folder(), ignored);
}

}  // namespace

std::filesystem::path scratch_folder() {
  // Never destroyed: remove_scratch runs at exit, after static destructors may have.
  static const std::filesystem::path* const folder = [] {
    const std::filesystem::path base = std::filesystem::is_directory("/dev/shm")
                                           ? "/dev/shm"
                                           : std::filesystem::temp_directory_path();
    auto* path = new std::filesystem::path(base / ("zero-fuzz-" + std::to_string(::getpid())));
    std::filesystem::create_directories(*path);
    std::atexit(remove_scratch);
    return path;
  }();
  return *folder;
}

std::filesystem::path fresh_folder() {
  const std::filesystem::path folder = scratch_folder() / "run";
  std::filesystem::remove_all(folder);
  std::filesystem::create_directories(folder);
  return folder;
}

void write_bytes(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace zero::fuzz
