// Where memory lives and work runs: the CPU or one CUDA device.
#pragma once

#include <string>

namespace zero {

enum class DeviceKind { kCpu, kCuda };

struct Device {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;

  static Device cpu() { return {DeviceKind::kCpu, 0}; }
  static Device cuda(int index) { return {DeviceKind::kCuda, index}; }
  bool operator==(const Device&) const = default;
  std::string to_string() const;  // "cpu" or "cuda:0"
};

// True when this program has the CUDA backend: it links zero::cuda, which registers it.
bool cuda_compiled();
// CUDA devices visible to this process; 0 without zero::cuda or without a driver/device.
int cuda_device_count();

}  // namespace zero
