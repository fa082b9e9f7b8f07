// CUDA runtime pieces of the core: allocators and dtype conversion on a device (skips without one).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "device_context_checks.h"
#include "zero/core/allocator.h"
#include "zero/core/cuda_ops.h"
#include "zero/core/device.h"

namespace zero {
namespace {

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_F(CudaTest, DeviceAllocatorRecordsInLedger) {
  MemoryLedger ledger;
  auto device = make_allocator(MemorySpace::kDevice, ledger, /*use_cuda=*/true);
  Buffer buffer = device->allocate(1 << 20, MemoryCategory::kParams);
  EXPECT_NE(buffer.data(), nullptr);
  EXPECT_EQ(ledger.entry(MemorySpace::kDevice, MemoryCategory::kParams).current_bytes, 1 << 20);
}

// The CUDA device context is a peer of the CPU one: the same checks, the CPU's arithmetic.
TEST_F(CudaTest, DeviceContextOperationsMatchTheCpuBackend) {
  auto context = make_cuda_context(0);
  EXPECT_EQ(context->backend(), "cuda");
  EXPECT_FALSE(context->model_runs_on_host());
  testing::check_device_operations(*context);
  testing::check_event_ordering(*context);
}

// What `zero env` prints: every visible device, the driver.
TEST_F(CudaTest, DevicesAndDriverAreDescribed) {
  const std::vector<CudaDeviceInfo> devices = cuda_devices();
  ASSERT_EQ(static_cast<int>(devices.size()), cuda_device_count());
  for (const CudaDeviceInfo& device : devices) {
    EXPECT_FALSE(device.name.empty());
    EXPECT_GE(device.major, 8) << "sm_80 and sm_90 are the architectures the build targets";
    EXPECT_GT(device.total_memory_bytes, 0u);
    EXPECT_GT(device.multiprocessors, 0);
    EXPECT_NE(device.describe().find("sm_" + std::to_string(device.major)), std::string::npos)
        << device.describe();
  }
  EXPECT_NE(cuda_driver_version().find("(CUDA "), std::string::npos) << cuda_driver_version();
  EXPECT_EQ(cuda_library_versions().rfind("cuda runtime ", 0), 0u) << cuda_library_versions();
}

TEST_F(CudaTest, HostTasksRunInStreamOrder) {
  auto context = make_cuda_context(0);
  std::vector<int> order;
  for (int i = 0; i < 10; ++i)
    context->compute_stream().submit([&order, i] { order.push_back(i); });
  context->compute_stream().synchronize();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST_F(CudaTest, ConvertMatchesHost) {
  for (DType target : {DType::kBFloat16, DType::kFloat16}) {
    std::vector<float> values(1023);
    for (std::size_t i = 0; i < values.size(); ++i)
      values[i] = (static_cast<float>(i) - 500.0f) * 0.37f;
    std::vector<std::uint16_t> host(values.size()), device_result(values.size());
    convert(values.data(), DType::kFloat32, host.data(), target, values.size());
    float* input = nullptr;
    std::uint16_t* output = nullptr;
    ASSERT_EQ(cudaMalloc(&input, values.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&output, values.size() * 2), cudaSuccess);
    cudaMemcpy(input, values.data(), values.size() * 4, cudaMemcpyHostToDevice);
    convert_on_device(input, DType::kFloat32, output, target, values.size(), nullptr);
    cudaMemcpy(device_result.data(), output, values.size() * 2, cudaMemcpyDeviceToHost);
    EXPECT_EQ(host, device_result) << name_of(target);
    cudaFree(input);
    cudaFree(output);
  }
}

}  // namespace
}  // namespace zero
