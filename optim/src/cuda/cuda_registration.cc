// zero::cuda's part in optim: the fused CUDA steps (cuda_optimizer.h) as the optimizers' step on
// a CUDA context (device_steps.h), before main. The linker flag --undefined=
// zero_optim_cuda_registration in zero::cuda's usage requirements (optim/CMakeLists.txt) keeps
// this object in every program that links zero::cuda.
#include <variant>

#include "../device_steps.h"
#include "cuda_optimizer.h"

namespace {

void fused_device_step(zero::DeviceContext& context, zero::Stream& stream,
                       std::string_view optimizer, std::span<zero::ShardChunk> chunks,
                       const zero::OptimizerStep& step,
                       const zero::optim::detail::DeviceHyperparams& hyper) {
  std::visit(
      [&](const auto& kind) {
        zero::optim::cuda::fused_step(*zero::optim::cuda::device_passes(context, stream), optimizer,
                                      chunks, step, kind);
      },
      hyper);
}

int register_fused_steps() {
  zero::optim::detail::register_device_step(fused_device_step);
  return 1;
}

}  // namespace

extern "C" {
extern const int zero_optim_cuda_registration;
const int zero_optim_cuda_registration = register_fused_steps();
}
