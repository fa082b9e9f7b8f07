// main() for the non-MPI GoogleTest executables: gtest_main's, except that a run in which a case
// skipped exits with kSkipExitCode (tests/common/skip_status.h) so ctest reports it as Skipped.
#include <gtest/gtest.h>

#include "skip_status.h"

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  return zero::testing::skip_aware_status(RUN_ALL_TESTS() != 0);
}
