// What golden tests share: running a reference script of tests/golden with ZERO_PYTHON, and
// comparing tensors relative to their scale with the measured error printed for the record.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "test_data.h"

namespace zero::testing {

// Runs tests/golden/<script> with `arguments` under ZERO_PYTHON; returns its exit code (3 when
// ZERO_PYTHON or ZERO_SOURCE_DIR is unset or the script's imports are missing, 127: no python).
inline int run_golden_script(const std::string& script, const std::string& arguments) {
  const char* python = std::getenv("ZERO_PYTHON");
  const char* source = std::getenv("ZERO_SOURCE_DIR");
  if (python == nullptr || source == nullptr || *python == '\0') return 3;
  const std::string command =
      std::string("\"") + python + "\" \"" + source + "/tests/golden/" + script + "\" " + arguments;
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

// A reference script's output, written once per test suite into a scratch folder of its own:
// run() in SetUpTestSuite, remove() in TearDownTestSuite, ZERO_GOLDEN_SUITE_READY(suite) first in
// SetUp (skips when ZERO_PYTHON cannot import what the script needs, fails when it failed).
struct GoldenSuite {
  std::filesystem::path folder;
  std::string script;
  int status = 0;
  // Runs tests/golden/<script> `mode` "<folder>".
  void run(const std::string& name, const std::string& script_name, const std::string& mode) {
    folder = scratch_dir(name);
    script = script_name;
    status = run_golden_script(script, mode + " \"" + folder.string() + "\"");
  }
  void remove() const { std::filesystem::remove_all(folder); }
  bool unavailable() const { return status == 3 || status == 127; }
};
#define ZERO_GOLDEN_SUITE_READY(suite)                                                      \
  do {                                                                                      \
    if ((suite).unavailable())                                                              \
      GTEST_SKIP() << "python3 with torch and transformers is not available (ZERO_PYTHON)"; \
    ASSERT_EQ((suite).status, 0) << "tests/golden/" << (suite).script << " failed";         \
  } while (false)

// max |actual - expected| / max |expected|: the error relative to the tensor's scale.
inline double relative_error(const float* actual, const float* expected, std::size_t count) {
  double max_difference = 0.0, max_expected = 0.0;
  for (std::size_t i = 0; i < count; ++i) {
    max_difference =
        std::max(max_difference, std::abs(static_cast<double>(actual[i]) - expected[i]));
    max_expected = std::max(max_expected, std::abs(static_cast<double>(expected[i])));
  }
  return max_expected > 0 ? max_difference / max_expected : max_difference;
}

// Expects error <= tolerance and prints the measured error (for the record).
inline void expect_within(const std::string& what, double error, double tolerance) {
  std::printf("  %-48s relative error %.3g (tolerance %.0e)\n", what.c_str(), error, tolerance);
  EXPECT_LE(error, tolerance) << what;
}

}  // namespace zero::testing
