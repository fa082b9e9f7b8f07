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

AttentionLayout attention_layout(DeviceKind device, std::int64_t B, std::int64_t T, std::int64_t C,
                                 std::int64_t NH) {
  ZERO_CHECK(NH > 0 && C % NH == 0, "GPT-2 attention: n_embd ", C, " is not a multiple of n_head ",
             NH);
  const std::int64_t HS = C / NH;
  if (device == DeviceKind::kCuda && HS >= 1 && HS <= kCudaTiledAttentionMaxHeadSize)
    return {.saved_per_row = NH, .scratch = B * NH * T};
  return {.saved_per_row = NH * T, .scratch = B * NH * T * T};
}

}  // namespace zero::gpt2
