// zero::make_engine: the one place a zero::Engine is assembled from its options, with the
// optimizer and learning-rate schedule they name (zero::optim) and the NVMe swap store for
// `device: nvme` offload (zero::offload). Every trainer, example, benchmark and test that builds an
// engine calls it; the engine itself (zero::core) knows none of these implementations.
#pragma once

#include <memory>

#include "zero/comm/communicator.h"
#include "zero/core/device_context.h"
#include "zero/core/swap_store.h"
#include "zero/engine/engine.h"
#include "zero/engine/optimizer.h"
#include "zero/engine/options.h"

namespace zero {

// What make_engine takes besides the options. Every part is optional: one left empty is made from
// the options.
struct EngineParts {
  // The rank's device (zero/core/device_context.h); null: the engine owns a CPU context. With a
  // planning context the engine records its allocations and makes no swap store.
  DeviceContext* context = nullptr;
  // In place of the schedule options.scheduler names (DeepSpeed's; none there: constant lr),
  // e.g. the Hugging Face schedule a trainer picks when the config has no "scheduler".
  std::unique_ptr<LrSchedule> schedule{};
  // In place of zero::offload's make_nvme_swap_store (tests pass an in-memory double).
  SwapStoreFactory swap_store_factory{};
};

// The engine for `options` on `communicator`'s rank: optim::make_optimizer(options.optimizer),
// parts.schedule or optim::make_lr_schedule(options.scheduler, options.optimizer.lr), and
// parts.swap_store_factory or make_nvme_swap_store. Throws zero::Error naming what is wrong (an
// optimizer or schedule the options cannot make). The communicator and a given context must
// outlive the engine. Every rank calls it with the same options.
std::unique_ptr<Engine> make_engine(const EngineOptions& options, Communicator& communicator,
                                    EngineParts parts = {});

}  // namespace zero
