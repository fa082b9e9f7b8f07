// ZERO_CUDA_CHECK(call): throws zero::Error naming a CUDA runtime call that failed and its error.
// Internal to zero's CUDA sources (libzero's device layer, the GPT-2 kernels), installed so every
// target above the core shares this one definition. It includes no CUDA header (public headers
// never do): the CUDA source that expands it has <cuda_runtime.h> already.
#pragma once

#include "zero/core/error.h"

#define ZERO_CUDA_CHECK(call)                                         \
  do {                                                                \
    const cudaError_t zero_cuda_status = (call);                      \
    ZERO_CHECK(zero_cuda_status == cudaSuccess, "CUDA call ", #call,  \
               " failed: ", cudaGetErrorName(zero_cuda_status), ": ", \
               cudaGetErrorString(zero_cuda_status));                 \
  } while (false)
