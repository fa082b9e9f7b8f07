// Checks of a DeviceContext's operations that every backend must pass (the CPU backend is the
// oracle: each expectation is its fp32 arithmetic): tests/core/device_context_test.cc runs them
// on the CPU context, tests/core/cuda_test.cc on the CUDA one.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "zero/core/device_context.h"

namespace zero::testing {

// Host values -> a new device buffer (through a host-space buffer and the copy stream).
inline Buffer to_device(DeviceContext& context, const void* values, std::size_t size_bytes) {
  Buffer host =
      context.allocator(MemorySpace::kHost).allocate(size_bytes, MemoryCategory::kWorkspace);
  std::memcpy(host.data(), values, size_bytes);
  Buffer device =
      context.allocator(MemorySpace::kDevice).allocate(size_bytes, MemoryCategory::kWorkspace);
  context.copy(context.copy_stream(), host.data(), device.data(), size_bytes);
  context.copy_stream().synchronize();
  return device;
}

template <typename T>
std::vector<T> to_host(DeviceContext& context, Stream& stream, const Buffer& device,
                       std::size_t count) {
  Buffer host =
      context.allocator(MemorySpace::kHost).allocate(count * sizeof(T), MemoryCategory::kWorkspace);
  context.copy(stream, device.data(), host.data(), count * sizeof(T));
  stream.synchronize();
  std::vector<T> values(count);
  std::memcpy(values.data(), host.data(), count * sizeof(T));
  return values;
}

inline void check_device_operations(DeviceContext& context) {
  Stream& compute = context.compute_stream();
  const std::vector<float> x = {1.0f, -2.5f, 3.25f, 1e-3f, 7.0f, -0.125f, 65504.0f, 0.3f};
  const std::size_t n = x.size();
  Buffer dx = to_device(context, x.data(), n * 4);
  Buffer dy = context.allocator(MemorySpace::kDevice).allocate(n * 4, MemoryCategory::kWorkspace);

  context.fill(compute, dy.data(), DType::kFloat32, n, 1.5f);
  for (float value : to_host<float>(context, compute, dy, n)) EXPECT_EQ(value, 1.5f);

  context.axpy(compute, dx.data(), DType::kFloat32, dy.data(), DType::kFloat32, n, 0.7f);
  std::vector<float> y = to_host<float>(context, compute, dy, n);
  for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(y[i], 1.5f + x[i] * 0.7f) << i;

  context.scale(compute, dx.data(), DType::kFloat32, dy.data(), DType::kFloat32, n, 0.3f);
  y = to_host<float>(context, compute, dy, n);
  for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(y[i], x[i] * 0.3f) << i;

  // Into 16 bits: rounded as zero::convert rounds.
  for (DType half : {DType::kBFloat16, DType::kFloat16}) {
    Buffer dh = context.allocator(MemorySpace::kDevice).allocate(n * 2, MemoryCategory::kWorkspace);
    std::vector<float> scaled(n);
    for (std::size_t i = 0; i < n; ++i) scaled[i] = x[i] * 0.3f;
    std::vector<std::uint16_t> expected(n);
    convert(scaled.data(), DType::kFloat32, expected.data(), half, n);
    context.scale(compute, dx.data(), DType::kFloat32, dh.data(), half, n, 0.3f);
    EXPECT_EQ(to_host<std::uint16_t>(context, compute, dh, n), expected) << name_of(half);
    convert(x.data(), DType::kFloat32, expected.data(), half, n);
    context.convert(compute, dx.data(), DType::kFloat32, dh.data(), half, n);
    EXPECT_EQ(to_host<std::uint16_t>(context, compute, dh, n), expected) << name_of(half);
  }

  // From 16 bits into fp32 (the engine's host gradient accumulation under offload_optimizer takes
  // this path), past the size where the host loops run on several threads: each element widened
  // exactly, then y + x · alpha and x · alpha.
  const std::size_t m = (std::size_t{1} << 16) + 37;
  std::vector<float> wide(m), base(m);
  for (std::size_t i = 0; i < m; ++i) {
    wide[i] = static_cast<float>(static_cast<int>(i % 1001) - 500) * 0.01171875f;
    base[i] = static_cast<float>(i % 97) * 0.25f - 3.0f;
  }
  for (DType half : {DType::kBFloat16, DType::kFloat16}) {
    std::vector<std::uint16_t> narrow(m);
    std::vector<float> widened(m);
    convert(wide.data(), DType::kFloat32, narrow.data(), half, m);
    convert(narrow.data(), half, widened.data(), DType::kFloat32, m);
    Buffer dn = to_device(context, narrow.data(), m * 2);
    Buffer dz = to_device(context, base.data(), m * 4);
    context.axpy(compute, dn.data(), half, dz.data(), DType::kFloat32, m, 0.7f);
    std::vector<float> z = to_host<float>(context, compute, dz, m);
    for (std::size_t i = 0; i < m; ++i)
      ASSERT_EQ(z[i], base[i] + widened[i] * 0.7f) << name_of(half) << " axpy element " << i;
    context.scale(compute, dn.data(), half, dz.data(), DType::kFloat32, m, 0.3f);
    z = to_host<float>(context, compute, dz, m);
    for (std::size_t i = 0; i < m; ++i)
      ASSERT_EQ(z[i], widened[i] * 0.3f) << name_of(half) << " scale element " << i;
  }

  SquaresResult squares;
  context.sum_of_squares(compute, dx.data(), DType::kFloat32, n, &squares);
  compute.synchronize();
  double expected_sum = 0.0;
  for (float value : x) expected_sum += static_cast<double>(value) * value;
  EXPECT_NEAR(squares.sum, expected_sum, 1e-12 * expected_sum);
  EXPECT_FALSE(squares.nonfinite);
  std::vector<float> bad = x;
  bad[3] = std::numeric_limits<float>::infinity();
  Buffer dbad = to_device(context, bad.data(), n * 4);
  context.sum_of_squares(compute, dbad.data(), DType::kFloat32, n, &squares);
  compute.synchronize();
  EXPECT_TRUE(squares.nonfinite);
  bad[3] = std::numeric_limits<float>::quiet_NaN();
  dbad = to_device(context, bad.data(), n * 4);
  context.sum_of_squares(compute, dbad.data(), DType::kFloat32, n, &squares);
  compute.synchronize();
  EXPECT_TRUE(squares.nonfinite);
}

// Work on the copy stream ordered after the compute stream by an event sees the compute result.
inline void check_event_ordering(DeviceContext& context) {
  constexpr std::size_t n = 1 << 16;
  Buffer a = context.allocator(MemorySpace::kDevice).allocate(n * 4, MemoryCategory::kWorkspace);
  Buffer b = context.allocator(MemorySpace::kDevice).allocate(n * 4, MemoryCategory::kWorkspace);
  for (int round = 0; round < 20; ++round) {
    const auto value = static_cast<float>(round + 1);
    context.fill(context.compute_stream(), a.data(), DType::kFloat32, n, value);
    context.copy_stream().wait(context.compute_stream().record());
    context.copy(context.copy_stream(), a.data(), b.data(), n * 4);
    const std::vector<float> copied = to_host<float>(context, context.copy_stream(), b, n);
    EXPECT_EQ(copied.front(), value);
    EXPECT_EQ(copied.back(), value);
  }
}

}  // namespace zero::testing
