// make_nvme_swap_store() in a build without liburing: a clear error naming the package.
#include "zero/core/error.h"
#include "zero/offload/nvme_swap_store.h"

namespace zero {

std::unique_ptr<SwapStore> make_nvme_swap_store(const NvmeSwapOptions& options) {
  ZERO_THROW("NVMe swap to ", options.nvme_path,
             " needs liburing, which this build of zero lacks: install the Debian package "
             "liburing-dev (scripts/setup.sh) and configure again (ZERO_WITH_LIBURING=AUTO or ON)");
}

void remove_swap_directories() noexcept {}

}  // namespace zero
