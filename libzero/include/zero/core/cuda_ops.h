// Device-side operations of the runtime core, defined by zero::cuda (a program that links it:
// cuda_compiled()). Streams cross this header as opaque handles; nullptr is the default stream.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "zero/core/dtype.h"

namespace zero {

class Stream;  // zero/core/stream.h

using CudaStreamHandle = void*;  // a cudaStream_t

// The cudaStream_t behind a stream of a CUDA DeviceContext, for code above the core that enqueues
// its own CUDA work on the device layer's streams (the GPT-2 CUDA kernels). Throws zero::Error
// naming the stream when it is not a CUDA stream.
CudaStreamHandle cuda_stream_handle(Stream& stream);

// Converts `count` elements between dtypes on the device, enqueued on `stream` (asynchronous).
// Pointers are device pointers. Same rounding as zero::convert on the host.
void convert_on_device(const void* source, DType source_dtype, void* destination,
                       DType destination_dtype, std::size_t count, CudaStreamHandle stream);

// "cuda runtime 13.0, cublasLt 13.1.0, cudnn 9.19.0, nccl 2.28.9": the runtime and NCCL this
// process linked, cuBLASLt and cuDNN as found by the loader (dlopen of their sonames: zero::core
// links neither), each "not found" when absent, with the header version built against beside a
// loaded version that differs.
std::string cuda_library_versions();

// "550.54.15 (CUDA 12.4)": the NVIDIA kernel module's version (/proc/driver/nvidia/version) and
// the CUDA version its driver library supports; "none (...)" when no driver is loaded.
std::string cuda_driver_version();

// A visible CUDA device as the runtime describes it.
struct CudaDeviceInfo {
  int index = 0;
  std::string name;          // "NVIDIA H100 80GB HBM3"
  int major = 0, minor = 0;  // compute capability
  std::size_t total_memory_bytes = 0;
  int multiprocessors = 0;
  std::string pci_bus_id;        // "0000:19:00.0"
  std::string describe() const;  // "cuda:0 NVIDIA H100 80GB HBM3, sm_90, 79.1 GiB, 132 SMs, ..."
};
// Empty without zero::cuda (zero::core answers it, so code that asks links everywhere).
std::vector<CudaDeviceInfo> cuda_devices();

}  // namespace zero
