// main() for mpi-labelled GoogleTest executables: InitGoogleTest -> MPI_Init_thread ->
// RUN_ALL_TESTS -> MPI_Finalize. Rank 0 prints the usual report; other ranks print only their
// failures, prefixed with their rank. The exit code is 1 on every rank if any rank failed, else
// kSkipExitCode (tests/common/skip_status.h) on every rank if any rank skipped a case, else 0.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

#include "skip_status.h"

namespace {

class FailurePrinter : public testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 result.summary());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(rank));
  }
  const int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  const int skipped = testing::UnitTest::GetInstance()->skipped_test_count() > 0 ? 1 : 0;
  int local[2] = {failed, skipped};
  int global[2] = {0, 0};
  MPI_Allreduce(local, global, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  if (global[0] != 0) return 1;
  if (global[1] == 0) return 0;
  // Every rank exits with the skip code; rank 0 lists its skipped cases.
  if (rank != 0 || skipped == 0) return zero::testing::kSkipExitCode;
  return zero::testing::skip_aware_status(false);
}
