// Device names; the CUDA queries live in cuda/device_cuda.cc when CUDA is compiled in.
#include "zero/core/device.h"

namespace zero {

std::string Device::to_string() const {
  return kind == DeviceKind::kCpu ? std::string("cpu") : "cuda:" + std::to_string(index);
}

#ifndef ZERO_WITH_CUDA
bool cuda_compiled() { return false; }
int cuda_device_count() { return 0; }
#endif

}  // namespace zero
