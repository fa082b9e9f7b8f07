// Collectives over host values for callers outside the engine (the trainer's preemption flag,
// its memory-peak gather, the classification task's predictions), and the barrier the host waits
// for. The communicator gets a staging buffer from `context`'s device allocator (workspace, in
// the ledger), filled and read back on the context's compute stream: every collective buffer of a
// run is the device's, on the CPU backend too, so the path NCCL takes is the one CI runs (and the
// checking communicator of the tests sees). Only a host communicator (mpi, gloo, ...) beside a
// device whose memory the host cannot address (CUDA) gets the host pointers. Either way the call
// returns with the result in host memory (it waits for the collective). The engine stages its own
// scalars through its reduce bucket instead (Engine::Impl::all_reduce_host_values), so its plans
// hold no extra buffer.
#pragma once

#include <span>
#include <string_view>

#include "zero/comm/communicator.h"

namespace zero {

class DeviceContext;

// values[i] = op over ranks of values[i], in place.
void all_reduce_host(Communicator& communicator, DeviceContext& context, std::span<float> values,
                     ReduceOp op, std::string_view label);

// Returns once every rank has called it: a barrier the host waits for. (Communicator::barrier is
// stream-ordered and returns at once, so host code that orders its files or its output across
// the ranks, or returns to a caller that may destroy the communicator, waits here.)
void host_barrier(Communicator& communicator, std::string_view label);

// recv (world_size × send.size() values) gets every rank's `send` in rank order.
void all_gather_host(Communicator& communicator, DeviceContext& context,
                     std::span<const float> send, std::span<float> recv, std::string_view label);

}  // namespace zero
