// The CUDA device context's optimizer step: an Optimizer's rule() run as fused kernels over
// device shard chunks (internal).
#pragma once

#include <cuda_runtime.h>

#include <span>

#include "zero/core/allocator.h"
#include "zero/core/optimizer.h"
#include "zero/core/stream.h"

namespace zero::cuda {

// DeviceContext::optimizer_step's contract on the CUDA backend. Adam/AdamW and SGD are one kernel
// per chunk on `stream`, no host wait. Lamb runs pass 1 per tensor segment, waits on the host
// for the per-segment norms (the trust ratios need them all-reduced: OptimizerStep::
// all_reduce_sum gets page-locked host memory from `pinned`, which host and device can address),
// then pass 2 per segment. `device` and `pinned` hold Lamb's scratch.
void optimizer_step(Stream& stream, cudaStream_t native_stream, Allocator& device,
                    Allocator& pinned, const Optimizer& optimizer, std::span<ShardChunk> chunks,
                    const OptimizerStep& step);

// The same step with every pass run on the host through the kernels' own element rules
// (optimizer_kernels.h's host twins), on host memory: the coefficients, expressions, 16-bit
// handling and Lamb's bookkeeping of the device step, testable without a device.
void optimizer_step_on_host(const Optimizer& optimizer, std::span<ShardChunk> chunks,
                            const OptimizerStep& step);

}  // namespace zero::cuda
