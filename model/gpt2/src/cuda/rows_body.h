// The bodies and launch configuration of the GPT-2 CUDA row kernels (rows.cu): the gather-widen
// of embedding rows (Kernels::widen_rows), the scatter-accumulate into them (accumulate_rows) and
// the fp32 row gather/scatter (copy_rows), each one launch of one thread per element of the
// count × C rows it moves, the row indices in device memory. Templated on the thread
// (zero/core/kernel_thread.h) and on the table's storage type (float, or a 16-bit type: the
// device's __nv_bfloat16/__half in rows.cu, zero::BFloat16/Float16 in the CPU emulation test), so
// tests/model/gpt2_cuda_emulation_test.cc runs each body over its launch grid. C++17 for nvcc.
#pragma once

#include <cstdint>

#include "layers_body.h"
#include "zero/core/kernel_thread.h"

namespace zero::gpt2::cuda {

// One thread per element of the count × C rows (layers_body.h's elementwise launch).
constexpr LaunchConfig rows_launch(std::int64_t count, std::int64_t C) {
  return elementwise_launch(count * C);
}
// The most elements one rows launch covers (rows_launch's grid, 256 threads per block).
constexpr std::int64_t kMaxRowsElements = kMaxLinearBlocks * kLayerThreads;

// out[i, c] = widen(table[rows[i], c]), i < count, c < C: exact (fp32 or a 16-bit type widened).
template <typename T, typename Thread>
ZERO_HOST_DEVICE void widen_rows_body(const Thread& thread, float* out, const T* table,
                                      const int* rows, std::int64_t count, std::int64_t C) {
  const std::int64_t index = global_x(thread);
  if (index >= count * C) return;
  const std::int64_t i = index / C, c = index % C;
  out[index] = kernels::Element<T>::widen(table[static_cast<std::int64_t>(rows[i]) * C + c]);
}

// table[rows[i], c] += in[i, c]: the sum in fp32, rounded once into T (the CPU's
// cpu::accumulate). The rows are distinct, so every element has one writer and no atomics.
template <typename T, typename Thread>
ZERO_HOST_DEVICE void accumulate_rows_body(const Thread& thread, T* table, const float* in,
                                           const int* rows, std::int64_t count, std::int64_t C) {
  const std::int64_t index = global_x(thread);
  if (index >= count * C) return;
  const std::int64_t i = index / C, c = index % C;
  T& target = table[static_cast<std::int64_t>(rows[i]) * C + c];
  target = kernels::Element<T>::narrow(
      kernels::add_rounded(kernels::Element<T>::widen(target), in[index]));
}

// Gather out[i, c] = in[rows[i], c], or scatter out[rows[i], c] = in[i, c] (`scatter`).
template <typename Thread>
ZERO_HOST_DEVICE void copy_rows_body(const Thread& thread, float* out, const float* in,
                                     const std::int64_t* rows, std::int64_t count, std::int64_t C,
                                     bool scatter) {
  const std::int64_t index = global_x(thread);
  if (index >= count * C) return;
  const std::int64_t i = index / C, c = index % C;
  const std::int64_t other = rows[i] * C + c;
  if (scatter)
    out[other] = in[index];
  else
    out[index] = in[other];
}

}  // namespace zero::gpt2::cuda
