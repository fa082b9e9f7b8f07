// Where tests find their inputs: the shared data folder (skip when absent) and scratch space; a
// file's bytes and an action's error message, as tests compare them.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>

#include "zero/core/error.h"

namespace zero::testing {

// The shared data folder (ZERO_SHARED_DATA), or an empty path when it is not present.
inline std::filesystem::path shared_data_dir() {
  const char* path = std::getenv("ZERO_SHARED_DATA");
  if (path == nullptr || !std::filesystem::is_directory(path)) return {};
  return std::filesystem::path(path);
}

// A fresh, empty scratch folder for one test, removed by the caller or left in the build tree.
inline std::filesystem::path scratch_dir(const std::string& name) {
  auto path = std::filesystem::temp_directory_path() /
              ("zero_test_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(path);
  std::filesystem::create_directories(path);
  return path;
}

// Every byte of `path` ("" when it cannot be read).
inline std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream stream(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(stream), std::istreambuf_iterator<char>()};
}

// The zero::Error `action` throws, its message; "" when it throws none.
inline std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

}  // namespace zero::testing

// Skips the current test when the shared data folder (or `relative` inside it) is missing.
#define ZERO_REQUIRE_SHARED_DATA(relative)                                                   \
  do {                                                                                       \
    if (::zero::testing::shared_data_dir().empty() ||                                        \
        !std::filesystem::exists(::zero::testing::shared_data_dir() / (relative)))           \
      GTEST_SKIP() << "shared data " << (relative) << " not present (set ZERO_SHARED_DATA)"; \
  } while (false)
