// make_engine: the engine with zero::optim's optimizer and schedule and zero::offload's NVMe store.
#include "zero/factory/engine_factory.h"

#include <utility>

#include "zero/offload/nvme_swap_store.h"
#include "zero/optim/lr_schedules.h"
#include "zero/optim/optimizers.h"

namespace zero {

std::unique_ptr<Engine> make_engine(const EngineOptions& options, Communicator& communicator,
                                    EngineParts parts) {
  std::unique_ptr<LrSchedule> schedule =
      parts.schedule ? std::move(parts.schedule)
                     : optim::make_lr_schedule(options.scheduler, options.optimizer.lr);
  auto engine =
      std::make_unique<Engine>(options, communicator, optim::make_optimizer(options.optimizer),
                               std::move(schedule), parts.context);
  engine->set_swap_store_factory(parts.swap_store_factory ? std::move(parts.swap_store_factory)
                                                          : SwapStoreFactory(make_nvme_swap_store));
  return engine;
}

}  // namespace zero
