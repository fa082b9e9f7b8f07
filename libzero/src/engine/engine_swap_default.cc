// The engine's default SwapStore for `device: nvme` offload: make_nvme_swap_store
// (zero/core/swap_store.h, liburing), in builds that have it (ZERO_WITH_NVME_SWAP, set where its
// source joins zero_core). The one place that knows whether the build has one; without it an nvme
// config fails at initialisation, naming the key, unless a factory was injected
// (Engine::set_swap_store_factory).
#include "zero/engine/engine.h"

namespace zero {

SwapStoreFactory default_swap_store_factory() {
#ifdef ZERO_WITH_NVME_SWAP
  return [](const NvmeSwapOptions& options) { return make_nvme_swap_store(options); };
#else
  return nullptr;
#endif
}

}  // namespace zero
