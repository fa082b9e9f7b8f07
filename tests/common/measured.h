// A bound's measured value, printed beside the bound on stdout, so that a GPU run's log gives the
// number each loose bound can be tightened to (issue 42): one line per measured quantity,
//   measured: Suite.Case/param WHAT: VALUE (bound BOUND, PERCENT% of it)
// scripts/gpu_check.sh's tests step collects these lines into its log's "bounds measured" table.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace zero::testing {

inline void print_measured(const std::string& what, double value, double bound) {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string name =
      test == nullptr ? "?" : std::string(test->test_suite_name()) + "." + test->name();
  std::printf("measured: %s %s: %.3e (bound %.1e, %.1f%% of it)\n", name.c_str(), what.c_str(),
              value, bound, bound > 0 ? 100.0 * value / bound : 0.0);
  std::fflush(stdout);
}

}  // namespace zero::testing
