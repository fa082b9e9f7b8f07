// The exit status every GoogleTest main in the tests returns: the run's failure status, else
// kSkipExitCode when any test case skipped (GTEST_SKIP), so that ctest (SKIP_RETURN_CODE, set by
// cmake/ZeroTesting.cmake) reports the executable as Skipped instead of Passed. A run with both
// failures and skips still fails.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace zero::testing {

inline constexpr int kSkipExitCode = 77;

// `failed`: RUN_ALL_TESTS() returned non-zero on this process. Prints the skipped cases.
inline int skip_aware_status(bool failed) {
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  if (failed) return 1;
  if (unit.skipped_test_count() == 0) return 0;
  std::printf("zero: %d of %d test cases skipped (ctest reports this executable as Skipped):\n",
              unit.skipped_test_count(), unit.test_to_run_count());
  for (int s = 0; s < unit.total_test_suite_count(); ++s) {
    const ::testing::TestSuite& suite = *unit.GetTestSuite(s);
    for (int t = 0; t < suite.total_test_count(); ++t) {
      const ::testing::TestInfo& info = *suite.GetTestInfo(t);
      if (!info.should_run() || !info.result()->Skipped()) continue;
      // The reason (GTEST_SKIP's message, first line): scripts/test.sh reads it in CI, where
      // only an absent shared data folder ("shared data ... not present") may excuse a skip.
      std::string reason;
      for (int p = 0; p < info.result()->total_part_count(); ++p) {
        const ::testing::TestPartResult& part = info.result()->GetTestPartResult(p);
        if (part.skipped() && part.message() != nullptr) reason = part.message();
      }
      reason = reason.substr(0, reason.find('\n'));
      std::printf("zero: skipped %s.%s: %s\n", suite.name(), info.name(), reason.c_str());
    }
  }
  std::fflush(stdout);
  return kSkipExitCode;
}

}  // namespace zero::testing
