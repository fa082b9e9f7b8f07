// The registered CUDA backend (cuda_backend.h): one pointer, set during static initialisation
// (constant-initialised to nullptr, so no initialisation order matters).
#include "cuda_backend.h"

#include "zero/core/error.h"

namespace zero::detail {
namespace {
const CudaBackend* registered = nullptr;
}  // namespace

const char kNoCudaBackend[] =
    "this program has no CUDA backend: link zero::cuda (find_package(zero COMPONENTS cuda) from "
    "a zero configured with ZERO_WITH_CUDA and the CUDA toolkit installed)";

void register_cuda_backend(const CudaBackend& backend) {
  ZERO_CHECK(
      backend.device_count && backend.devices && backend.make_context && backend.make_allocator,
      "register_cuda_backend: an entry of the CUDA backend is missing");
  registered = &backend;
}

const CudaBackend* cuda_backend() { return registered; }

}  // namespace zero::detail
