// make_kernels: the one place the model's kernels are chosen from the device context.
#include "kernels_internal.h"
#include "zero/core/error.h"

namespace zero::gpt2 {

std::unique_ptr<Kernels> make_kernels(DeviceContext& context) {
  if (context.device().kind == DeviceKind::kCuda && !context.planning()) {
#ifdef ZERO_GPT2_WITH_CUDA
    return make_cuda_kernels(context);
#else
    ZERO_THROW("GPT-2 kernels: the device context is ", context.backend(), " on ",
               context.device().to_string(), " but this build of zero::gpt2 has no CUDA kernels");
#endif
  }
  return make_cpu_kernels(context);
}

}  // namespace zero::gpt2
