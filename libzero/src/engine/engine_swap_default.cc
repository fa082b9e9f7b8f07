// The engine's default SwapStore for `device: nvme` offload: make_nvme_swap_store
// (zero/core/swap_store.h; liburing, or, in a build without liburing-dev, a function that throws
// naming the package), unless a factory was injected (Engine::set_swap_store_factory).
#include "zero/engine/engine.h"

namespace zero {

SwapStoreFactory default_swap_store_factory() {
  return [](const NvmeSwapOptions& options) { return make_nvme_swap_store(options); };
}

}  // namespace zero
