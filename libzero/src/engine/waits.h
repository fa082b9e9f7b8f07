// Blocking waits of the engine and its parts whose errors name the rank and the stage:
// "engine (rank r/w, stage s) <what>: <error>".
#pragma once

#include <string>

#include "zero/comm/communicator.h"
#include "zero/core/error.h"
#include "zero/core/stream.h"

namespace zero {

// Runs the blocking `wait`, adding the rank of `communicator`, `stage` and `what` to its error.
template <typename Wait>
void wait_naming(const Communicator& communicator, int stage, const std::string& what,
                 Wait&& wait) {
  try {
    wait();
  } catch (const Error& error) {
    ZERO_THROW("engine (rank ", communicator.rank(), "/", communicator.world_size(), ", stage ",
               stage, ") ", what, ": ", error.what());
  }
}

// Waits for the collectives queued on `communicator`.
inline void synchronize_naming(Communicator& communicator, int stage, const std::string& what) {
  wait_naming(communicator, stage, what, [&] { communicator.synchronize(); });
}

// Waits for the work queued on `stream` (a stream of the rank of `communicator`).
inline void synchronize_naming(Stream& stream, const Communicator& communicator, int stage,
                               const std::string& what) {
  wait_naming(communicator, stage, what, [&] { stream.synchronize(); });
}

}  // namespace zero
