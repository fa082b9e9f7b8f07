// The bodies and launch configuration of the CUDA backend's elementwise kernels (fill, scale/axpy,
// sum of squares with an inf/NaN flag: cuda_kernels.cu; dtype conversion: convert.cu): grid-stride
// loops over fp32/bf16/fp16 with fp32 arithmetic, templated on the thread
// (zero/core/kernel_thread.h) and on the 16-bit storage types (Types::BFloat16, Types::Float16:
// the device's in the .cu files, zero's in the CPU emulation test). C++17 for nvcc.
#pragma once

#include <cstddef>

#include "zero/core/dtype.h"
#include "zero/core/kernel_thread.h"

namespace zero::kernels {

constexpr int kElementwiseThreads = 256;
constexpr std::int64_t kMaxElementwiseBlocks = 65535;

// Blocks of 256 threads, at most 65535 of them (the loops stride over the rest).
constexpr LaunchConfig grid_stride_launch(std::size_t count) {
  return linear_launch(
      blocks_for(static_cast<std::int64_t>(count), kElementwiseThreads, kMaxElementwiseBlocks),
      kElementwiseThreads);
}

template <typename Types>
ZERO_HOST_DEVICE_INLINE float load_element(const void* data, DType dtype, std::size_t i) {
  using B = typename Types::BFloat16;
  using H = typename Types::Float16;
  switch (dtype) {
    case DType::kFloat32: return static_cast<const float*>(data)[i];
    case DType::kBFloat16: return Element<B>::widen(static_cast<const B*>(data)[i]);
    case DType::kFloat16: return Element<H>::widen(static_cast<const H*>(data)[i]);
  }
  return 0.0f;
}

template <typename Types>
ZERO_HOST_DEVICE_INLINE void store_element(void* data, DType dtype, std::size_t i, float value) {
  using B = typename Types::BFloat16;
  using H = typename Types::Float16;
  switch (dtype) {
    case DType::kFloat32: static_cast<float*>(data)[i] = value; break;
    case DType::kBFloat16: static_cast<B*>(data)[i] = Element<B>::narrow(value); break;
    case DType::kFloat16: static_cast<H*>(data)[i] = Element<H>::narrow(value); break;
  }
}

template <typename Types, typename Thread>
ZERO_HOST_DEVICE void fill_body(const Thread& thread, void* destination, DType dtype,
                                std::size_t count, float value) {
  for (std::size_t i = grid_stride_first(thread); i < count; i += grid_stride(thread))
    store_element<Types>(destination, dtype, i, value);
}

// destination = alpha · source (accumulate: destination + alpha · source), each step rounded once.
template <typename Types, typename Thread>
ZERO_HOST_DEVICE void scale_body(const Thread& thread, const void* source, DType source_dtype,
                                 void* destination, DType destination_dtype, std::size_t count,
                                 float alpha, bool accumulate) {
  for (std::size_t i = grid_stride_first(thread); i < count; i += grid_stride(thread)) {
    float value = multiply_rounded(load_element<Types>(source, source_dtype, i), alpha);
    if (accumulate)
      value = add_rounded(load_element<Types>(destination, destination_dtype, i), value);
    store_element<Types>(destination, destination_dtype, i, value);
  }
}

struct SquaresShared {
  double partial[kElementwiseThreads];
};

// result[0] += Σ x² (double; per block a tree over the threads, then an atomic add per block);
// result[1] = 1 when any element is inf or NaN.
template <typename Types, typename Thread>
ZERO_HOST_DEVICE void squares_body(const Thread& thread, SquaresShared& shared, const void* x,
                                   DType dtype, std::size_t count, double* result) {
  const unsigned t = thread.thread_index().x;
  double sum = 0.0;
  bool nonfinite = false;
  for (std::size_t i = grid_stride_first(thread); i < count; i += grid_stride(thread)) {
    const double value = load_element<Types>(x, dtype, i);
    nonfinite |= !is_finite(value);
    sum += value * value;
  }
  const auto partial = thread.shared(shared.partial);
  partial[t] = sum;
  thread.sync_block();
  for (int step = static_cast<int>(thread.block_dim().x) / 2; step > 0; step /= 2) {
    if (static_cast<int>(t) < step) partial[t] += partial[t + step];
    thread.sync_block();
  }
  if (t == 0) thread.atomic_add(result, partial[0]);
  if (nonfinite) result[1] = 1.0;
}

// destination[i] = source[i] converted through fp32, rounding to nearest even.
template <typename Thread, typename Source, typename Destination>
ZERO_HOST_DEVICE void convert_body(const Thread& thread, const Source* source,
                                   Destination* destination, std::size_t count) {
  for (std::size_t i = grid_stride_first(thread); i < count; i += grid_stride(thread))
    destination[i] = Element<Destination>::narrow(Element<Source>::widen(source[i]));
}

}  // namespace zero::kernels
