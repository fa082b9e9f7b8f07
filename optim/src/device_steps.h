// The optimizers' fused steps on a CUDA context, as device_step.cc reaches them: registered
// before main by zero::cuda's part in optim (src/cuda/cuda_registration.cc), so zero::optim links
// no CUDA library. Without it a step on a CUDA context says what to link.
#pragma once

#include <span>
#include <string_view>
#include <variant>

#include "zero/core/device_context.h"
#include "zero/core/optimizer.h"
#include "zero/optim/kernels.h"

namespace zero::optim::detail {

using DeviceHyperparams = std::variant<AdamHyperparams, SgdHyperparams, LambHyperparams>;
// One step of the optimizer `optimizer` names, with `hyper`'s kind, on `stream` of CUDA `context`.
using DeviceStep = void (*)(DeviceContext& context, Stream& stream, std::string_view optimizer,
                            std::span<ShardChunk> chunks, const OptimizerStep& step,
                            const DeviceHyperparams& hyper);

// Called once, during static initialisation, by the program's copy of zero::cuda.
void register_device_step(DeviceStep step);

}  // namespace zero::optim::detail
