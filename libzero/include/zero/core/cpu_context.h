// The CPU backend's options and the factory of a rank's context from its Device. The CPU backend
// runs in one of two modes: host mode (the model's kernels on the calling thread, the engine
// waiting for the compute stream before each unit it hands over) or asynchronous mode (the
// model's kernels are tasks of the compute stream, ordered by events and release_after exactly as
// on the CUDA backend, so CI runs the CUDA path's ordering, under ZERO_STREAM_STRESS too).
#pragma once

#include <cstdint>
#include <memory>

#include "zero/core/cpu_stream.h"
#include "zero/core/device.h"
#include "zero/core/device_context.h"

namespace zero {

struct CpuContextOptions {
  StreamStress stress;  // off unless set
  // Asynchronous mode: model_runs_on_host() is false. Results equal host mode's bit for bit (the
  // same kernels run in the same order); the host waits only where it reads a value.
  bool asynchronous = false;
  // ZERO_STREAM_STRESS (StreamStress::from_environment) and ZERO_CPU_ASYNC=1 (or 0; another value
  // is a zero::Error naming the variable).
  static CpuContextOptions from_environment();
};

// Host waits made by the calling thread so far: calls of CpuStream::synchronize() and of
// synchronize() on a CpuStream's event, whether or not they block (a deterministic count). A
// stream waiting for another's event (Stream::wait) runs on the stream's worker and is no host
// wait. Per thread, so each rank of a thread-backed world counts its own; tests bound the waits
// of a training step with it.
std::uint64_t cpu_host_waits_on_this_thread();

// The CPU backend in the given mode and stress. make_cpu_context(StreamStress) (device_context.h)
// is this with the mode from ZERO_CPU_ASYNC.
std::unique_ptr<DeviceContext> make_cpu_context(const CpuContextOptions& options);

// The context of `device`: make_cpu_context() for the CPU, make_cuda_context(index) for
// cuda:index. The one place a rank's backend follows from its Device (zero/core/launch.h's
// choose_device picks the Device).
std::unique_ptr<DeviceContext> make_device_context(Device device);

}  // namespace zero
