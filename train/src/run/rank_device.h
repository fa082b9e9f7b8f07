// The rank's device for zero::train (internal): the one place a run's device is chosen
// (choose_device), its context made (RunOptions::make_device_context, else the backend's own) and
// checked against the communicator before anything runs.
#pragma once

#include <memory>

#include "zero/comm/communicator.h"
#include "zero/core/device_context.h"
#include "zero/train/arguments.h"
#include "zero/train/run_types.h"

namespace zero::train::detail {

// The context of choose_device(arguments.use_cpu) for this rank. Every collective of the run (the
// engine's, the trainer's through host_collectives.h) takes buffers of this device, so the
// communicator must take them where they live. Throws zero::Error, with nothing run, when the
// caller's factory makes no context or one on another device, or when the communicator takes
// another kind of memory.
std::unique_ptr<DeviceContext> make_rank_device_context(const TrainingArguments& arguments,
                                                        const Communicator& communicator,
                                                        const RunOptions& options);

}  // namespace zero::train::detail
