// Where tests find their inputs: the shared data folder (skip when absent) and scratch space.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

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

}  // namespace zero::testing

// Skips the current test when the shared data folder (or `relative` inside it) is missing.
#define ZERO_REQUIRE_SHARED_DATA(relative)                                                   \
  do {                                                                                       \
    if (::zero::testing::shared_data_dir().empty() ||                                        \
        !std::filesystem::exists(::zero::testing::shared_data_dir() / (relative)))           \
      GTEST_SKIP() << "shared data " << (relative) << " not present (set ZERO_SHARED_DATA)"; \
  } while (false)
