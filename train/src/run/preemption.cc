// SIGTERM / SIGUSR1: a flag read at step boundaries; the second signal ends the process at once.
#include "run/preemption.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "zero/comm/host_collectives.h"
#include "zero/core/error.h"

namespace zero::train::detail {

namespace {

// Set by the handler on whichever thread the signal lands, read by every rank's thread (thread
// ranks share it): an atomic, not a volatile sig_atomic_t, which orders nothing between threads
// (ThreadSanitizer: a race of the handler on rank 0's thread with rank 1's read in agreed()).
std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free flag");
std::mutex g_mutex;
int g_users = 0;
struct sigaction g_previous_term {};
struct sigaction g_previous_usr1 {};
struct sigaction g_previous_int {};
bool g_with_interrupt = false;

extern "C" void on_preemption_signal(int signal) {
  if (g_signal != 0) _exit(128 + signal);  // the second one: now (async-signal-safe)
  g_signal = signal;
}

}  // namespace

PreemptionHandlers::PreemptionHandlers(bool with_interrupt) {
  std::lock_guard lock(g_mutex);
  if (g_users++ > 0) return;
  g_signal = 0;
  struct sigaction action {};
  action.sa_handler = on_preemption_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  if (sigaction(SIGTERM, &action, &g_previous_term) != 0 ||
      sigaction(SIGUSR1, &action, &g_previous_usr1) != 0 ||
      (with_interrupt && sigaction(SIGINT, &action, &g_previous_int) != 0)) {
    g_users = 0;
    ZERO_THROW("cannot install the SIGTERM/SIGUSR1 handlers: ", std::strerror(errno));
  }
  g_with_interrupt = with_interrupt;
}

PreemptionHandlers::~PreemptionHandlers() {
  std::lock_guard lock(g_mutex);
  if (--g_users > 0) return;
  sigaction(SIGTERM, &g_previous_term, nullptr);
  sigaction(SIGUSR1, &g_previous_usr1, nullptr);
  if (g_with_interrupt) sigaction(SIGINT, &g_previous_int, nullptr);
  g_signal = 0;
}
int PreemptionHandlers::received() { return g_signal; }

bool PreemptionHandlers::agreed(Communicator& communicator, DeviceContext& context) const {
  float flag = g_signal != 0 ? 1.0f : 0.0f;
  all_reduce_host(communicator, context, {&flag, 1}, ReduceOp::kMax, "preemption flag");
  return flag > 0.0f;
}

}  // namespace zero::train::detail
