// Where optim/'s optimizers step on a device context: on a CUDA context their fused kernels
// (src/cuda/, registered by zero::cuda: device_steps.h) on the context's stream, on any other
// Optimizer::step_on's default (the CPU kernels on the stream of a CPU context; nothing in a plan).
// The one place that dispatches on the device.
#include "device_steps.h"
#include "zero/core/device.h"
#include "zero/core/device_context.h"
#include "zero/core/error.h"
#include "zero/optim/optimizers.h"

namespace zero::optim {
namespace {

detail::DeviceStep registered_device_step = nullptr;  // constant-initialised

void step_on_context(Optimizer& optimizer, const detail::DeviceHyperparams& hyper,
                     DeviceContext& context, Stream& stream, std::span<ShardChunk> chunks,
                     const OptimizerStep& step) {
  if (context.device().kind != DeviceKind::kCuda) {
    optimizer.Optimizer::step_on(context, stream, chunks, step);
    return;
  }
  ZERO_CHECK(registered_device_step, optimizer.name(), " step on ", context.device().to_string(),
             " (stream '", stream.name(),
             "'): this program has no fused CUDA optimizers: link zero::cuda "
             "(find_package(zero COMPONENTS cuda))");
  registered_device_step(context, stream, optimizer.name(), chunks, step, hyper);
}

}  // namespace

void detail::register_device_step(DeviceStep step) { registered_device_step = step; }

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
