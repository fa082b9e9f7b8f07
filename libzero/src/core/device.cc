// Device names; the CUDA queries go to the CUDA backend when the program links zero::cuda
// (cuda_backend.h; without it: no device is compiled in, none is visible, and none is listed).
#include "zero/core/device.h"

#include "cuda_backend.h"
#include "zero/core/cuda_ops.h"

namespace zero {

std::string Device::to_string() const {
  return kind == DeviceKind::kCpu ? std::string("cpu") : "cuda:" + std::to_string(index);
}

bool cuda_compiled() { return detail::cuda_backend() != nullptr; }

int cuda_device_count() {
  const detail::CudaBackend* backend = detail::cuda_backend();
  return backend ? backend->device_count() : 0;
}

std::vector<CudaDeviceInfo> cuda_devices() {
  const detail::CudaBackend* backend = detail::cuda_backend();
  return backend ? backend->devices() : std::vector<CudaDeviceInfo>{};
}

}  // namespace zero
