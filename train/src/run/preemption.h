// Preemption (internal to zero::train): SIGTERM and SIGUSR1 (Slurm's --signal), and SIGINT when
// asked (RunOptions::stop_on_interrupt: Ctrl-C in the Python module), ask the run to stop at the
// next step boundary with a checkpoint; a second one exits at once with 128 + signal.
#pragma once

#include <csignal>

#include "zero/comm/communicator.h"
#include "zero/core/device_context.h"

namespace zero::train::detail {

// Installs the handlers for its lifetime and restores the previous ones. Counted: ranks on
// threads of one process (the thread communicator) share one installation; the last to go
// restores.
class PreemptionHandlers {
 public:
  explicit PreemptionHandlers(bool with_interrupt = false);
  ~PreemptionHandlers();
  PreemptionHandlers(const PreemptionHandlers&) = delete;
  PreemptionHandlers& operator=(const PreemptionHandlers&) = delete;

  // The signal this process received (0: none).
  static int received();
  // All ranks, same order: whether any rank received a signal (an all-reduce max, so every rank
  // takes the same decision at the same step).
  // Every rank calls it (a collective through host_collectives.h on `context`'s buffers).
  bool agreed(Communicator& communicator, DeviceContext& context) const;
};

}  // namespace zero::train::detail
