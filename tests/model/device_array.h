// A device copy of a host vector for the CUDA kernel tests, freed on destruction; host() waits for
// the device and copies it back. Failures are gtest expectations.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace zero::gpt2::testing {

template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(const std::vector<T>& host) : count_(host.size()) {
    EXPECT_EQ(cudaMalloc(&data_, std::max<std::size_t>(1, count_) * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(data_, host.data(), count_ * sizeof(T), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  explicit DeviceArray(std::size_t count) : DeviceArray(std::vector<T>(count)) {}
  ~DeviceArray() { cudaFree(data_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return static_cast<T*>(data_); }
  std::vector<T> host() const {
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<T> values(count_);
    EXPECT_EQ(cudaMemcpy(values.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return values;
  }

 private:
  void* data_ = nullptr;
  std::size_t count_;
};

}  // namespace zero::gpt2::testing
