// The process's abort hooks: a fixed table of function pointers, filled under a lock and read
// without one, so run_abort_hooks() never waits on a thread that stopped while registering.
#include "zero/core/abort_hooks.h"

#include <atomic>
#include <mutex>

#include "zero/core/error.h"

namespace zero {
namespace {

std::atomic<AbortHook> g_hooks[kMaxAbortHooks];
std::atomic<int> g_num_hooks{0};
std::mutex g_add_mutex;

}  // namespace

void add_abort_hook(AbortHook hook) {
  ZERO_CHECK(hook != nullptr, "add_abort_hook: the hook is null");
  std::lock_guard lock(g_add_mutex);
  const int count = g_num_hooks.load(std::memory_order_relaxed);
  for (int i = 0; i < count; ++i)
    if (g_hooks[i].load(std::memory_order_relaxed) == hook) return;
  ZERO_CHECK(count < kMaxAbortHooks, "add_abort_hook: more than ", kMaxAbortHooks,
             " abort hooks registered");
  g_hooks[count].store(hook, std::memory_order_relaxed);
  g_num_hooks.store(count + 1, std::memory_order_release);
}

void run_abort_hooks() noexcept {
  const int count = g_num_hooks.load(std::memory_order_acquire);
  for (int i = 0; i < count; ++i) g_hooks[i].load(std::memory_order_relaxed)();
}

}  // namespace zero
