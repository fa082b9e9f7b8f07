// Abort hooks: registered once each, run in order by run_abort_hooks() and by abort_job() (in a
// forked child, which abort_job ends).
#include "zero/core/abort_hooks.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>

#include "zero/comm/communicator.h"
#include "zero/core/error.h"

namespace zero {
namespace {

std::atomic<int> g_first_runs{0};
std::atomic<int> g_second_runs{0};
std::atomic<int> g_order{0};
std::atomic<int> g_first_position{0};
std::atomic<int> g_second_position{0};

void first_hook() noexcept {
  ++g_first_runs;
  g_first_position = ++g_order;
}
void second_hook() noexcept {
  ++g_second_runs;
  g_second_position = ++g_order;
}

TEST(AbortHooks, RunOnceEachInRegistrationOrder) {
  add_abort_hook(first_hook);
  add_abort_hook(second_hook);
  add_abort_hook(first_hook);  // again: still once
  run_abort_hooks();
  EXPECT_EQ(g_first_runs, 1);
  EXPECT_EQ(g_second_runs, 1);
  EXPECT_LT(g_first_position, g_second_position);
  EXPECT_THROW(add_abort_hook(nullptr), Error);
}

void exit_with_42() noexcept { std::_Exit(42); }

TEST(AbortHooks, AbortJobRunsThemBeforeEndingTheProcess) {
  const pid_t child = fork();
  if (child == 0) {
    add_abort_hook(exit_with_42);  // proves it ran: abort_job itself would exit with 7
    abort_job(7);
  }
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 42);
}

}  // namespace
}  // namespace zero
