// Abort hooks: what a process must still do when it ends through abort_job() (std::_Exit, no
// destructors, no atexit handlers), registered by the component that owns the resource, so the
// communicator that ends the job needs to know none of them (the NVMe swap store removes its
// files this way, zero::offload).
#pragma once

namespace zero {

// A hook runs on whatever thread ends the process (main's error path, a collective watchdog's),
// while other threads may be anywhere: it must not throw, must not wait on anything but a short
// lock of its own, and must be idempotent (two threads ending the job at once both run it).
using AbortHook = void (*)() noexcept;

// Registers `hook` once (registering the same hook again does nothing). At most kMaxAbortHooks
// distinct hooks per process; more throw zero::Error. Thread-safe.
inline constexpr int kMaxAbortHooks = 16;
void add_abort_hook(AbortHook hook);

// Runs every registered hook in registration order. Called by abort_job() and by a rank that
// learns another one aborted (the Gloo store's abort key), just before std::_Exit. Never throws.
void run_abort_hooks() noexcept;

}  // namespace zero
