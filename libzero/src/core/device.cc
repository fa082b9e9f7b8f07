// Device names; the CUDA queries live in cuda/device_cuda.cc when CUDA is compiled in (without
// it: no device is compiled in, none is visible, and none is listed).
#include "zero/core/device.h"

#include "zero/core/cuda_ops.h"

namespace zero {

std::string Device::to_string() const {
  return kind == DeviceKind::kCpu ? std::string("cpu") : "cuda:" + std::to_string(index);
}

#ifndef ZERO_WITH_CUDA
bool cuda_compiled() { return false; }
int cuda_device_count() { return 0; }
std::vector<CudaDeviceInfo> cuda_devices() { return {}; }
#endif

}  // namespace zero
