// The NVMe SwapStore (ZeRO-Infinity's swap tier; zero::offload): one O_DIRECT file per region,
// read and written through liburing rings as the DeepSpeed "aio" settings say. The engine reaches
// it only through the SwapStore interface and a SwapStoreFactory (zero/core/swap_store.h):
// zero::make_engine installs make_nvme_swap_store, or `engine.set_swap_store_factory(
// zero::make_nvme_swap_store)` before initialize().
#pragma once

#include <memory>

#include "zero/core/swap_store.h"

namespace zero {

// Creates <nvme_path>/zero_swap_rank<rank>_<pid>/ and its files. Throws zero::Error naming the path
// when it is missing, not a directory, read-only, or on a filesystem without O_DIRECT; in a build
// without liburing (ZERO_WITH_LIBURING off or liburing-dev missing), naming the package.
std::unique_ptr<SwapStore> make_nvme_swap_store(const NvmeSwapOptions& options);

// Removes the swap folders of every live store of this process, for a process about to end
// without unwinding: destructors and exit() do it already, and abort_job() runs it as an abort
// hook (zero/core/abort_hooks.h; registered with the first store). The stores must not be used
// afterwards. Never throws.
void remove_swap_directories() noexcept;

}  // namespace zero
