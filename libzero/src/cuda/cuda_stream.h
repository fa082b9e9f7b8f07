// The cudaStream_t behind a stream of the CUDA device context (internal: for code in libzero that
// enqueues its own CUDA work, such as NCCL collectives, on the device layer's streams).
#pragma once

#include <cuda_runtime.h>

#include "zero/core/stream.h"

namespace zero::detail {

// Throws zero::Error naming the stream when it is not a CUDA stream of a CUDA DeviceContext.
cudaStream_t native_cuda_stream(Stream& stream);

}  // namespace zero::detail
