// Check wrappers for CUDA runtime, cuBLAS, cuDNN and NCCL status codes (internal).
#pragma once

#include <cuda_runtime.h>

#include "zero/core/error.h"

#define ZERO_CUDA_CHECK(call)                                         \
  do {                                                                \
    const cudaError_t zero_cuda_status = (call);                      \
    ZERO_CHECK(zero_cuda_status == cudaSuccess, "CUDA call ", #call,  \
               " failed: ", cudaGetErrorName(zero_cuda_status), ": ", \
               cudaGetErrorString(zero_cuda_status));                 \
  } while (false)
