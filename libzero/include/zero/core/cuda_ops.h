// Device-side operations of the runtime core, available when zero is built with CUDA
// (cuda_compiled()). Streams cross this header as opaque handles; nullptr is the default stream.
#pragma once

#include <cstddef>
#include <string>

#include "zero/core/dtype.h"

namespace zero {

using CudaStreamHandle = void*;  // a cudaStream_t

// Converts `count` elements between dtypes on the device, enqueued on `stream` (asynchronous).
// Pointers are device pointers. Same rounding as zero::convert on the host.
void convert_on_device(const void* source, DType source_dtype, void* destination,
                       DType destination_dtype, std::size_t count, CudaStreamHandle stream);

// "cuda runtime 13.0, cublas 13.0 (headers), cudnn 91300 (headers), nccl 22703": the runtime and
// NCCL this process linked, cuBLAS/cuDNN as built against.
std::string cuda_library_versions();

}  // namespace zero
