// zero::cuda's registration: the CUDA device layer (src/cuda/) as zero::core's CUDA backend and
// the NCCL communicator as make_nccl_communicator's, before main. A static library keeps an object
// only when something refers to it, so zero::cuda's usage requirements carry the linker flag
// --undefined=zero_cuda_registration (libzero/CMakeLists.txt): every program that links zero::cuda
// keeps this object, and its initialisation runs.
#include "../core/cuda_backend.h"
#include "../cuda/cuda_backend_entries.h"
#include "nccl_backend.h"

namespace {

int register_cuda_and_nccl() {
  static const zero::detail::CudaBackend backend{
      .device_count = zero::detail::cuda_runtime_device_count,
      .devices = zero::detail::cuda_runtime_devices,
      .make_context = zero::detail::make_cuda_runtime_context,
      .make_allocator = zero::detail::make_cuda_runtime_allocator};
  zero::detail::register_cuda_backend(backend);
  zero::detail::register_nccl_factory(zero::detail::make_nccl_runtime_communicator);
  return 1;
}

}  // namespace

extern "C" {
extern const int zero_cuda_registration;
const int zero_cuda_registration = register_cuda_and_nccl();
}
