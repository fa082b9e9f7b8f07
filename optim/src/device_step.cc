// Where optim/'s optimizers step on a device context: on a CUDA context their fused kernels
// (src/cuda/, built with CUDA) on the context's stream, on any other Optimizer::step_on's default
// (the CPU kernels on the stream of a CPU context; nothing in a plan). The one place that knows
// whether this build has the CUDA kernels.
#include "zero/core/device.h"
#include "zero/core/device_context.h"
#include "zero/core/error.h"
#include "zero/optim/optimizers.h"

#if defined(ZERO_OPTIM_WITH_CUDA)
#include "cuda/cuda_optimizer.h"
#endif

namespace zero::optim {
namespace {

template <typename Hyperparams>
void step_on_context(Optimizer& optimizer, [[maybe_unused]] const Hyperparams& hyper,
                     DeviceContext& context, Stream& stream, std::span<ShardChunk> chunks,
                     const OptimizerStep& step) {
  if (context.device().kind != DeviceKind::kCuda) {
    optimizer.Optimizer::step_on(context, stream, chunks, step);
    return;
  }
#if defined(ZERO_OPTIM_WITH_CUDA)
  cuda::fused_step(*cuda::device_passes(context, stream), optimizer.name(), chunks, step, hyper);
#else
  ZERO_THROW(optimizer.name(), " step on ", context.device().to_string(), " (stream '",
             stream.name(), "'): zero::optim was built without CUDA (ZERO_WITH_CUDA)");
#endif
}

}  // namespace

void Adam::step_on(DeviceContext& context, Stream& stream, std::span<ShardChunk> chunks,
                   const OptimizerStep& step) {
  step_on_context(*this, hyperparams(step), context, stream, chunks, step);
}

void Sgd::step_on(DeviceContext& context, Stream& stream, std::span<ShardChunk> chunks,
                  const OptimizerStep& step) {
  step_on_context(*this, hyperparams(step), context, stream, chunks, step);
}

void Lamb::step_on(DeviceContext& context, Stream& stream, std::span<ShardChunk> chunks,
                   const OptimizerStep& step) {
  step_on_context(*this, hyperparams(step), context, stream, chunks, step);
}

}  // namespace zero::optim
