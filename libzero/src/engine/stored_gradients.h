// The swapped gradient partition's stored 16-bit form (StatePolicy::grad_swap_dtype): the values
// as reduced, widened × post into fp32 where they are used (the norm's squares, the step), with
// the arithmetic of their unpacking into a zeroed fp32 window, so the fp32 values are the same.
#pragma once

#include <cstddef>
#include <cstring>

#include "../cpu/host_arithmetic.h"
#include "zero/core/dtype.h"

namespace zero {

// fp32 gradients from `count` stored values of `dtype`: 0 + value × post, element by element (in
// one pass; it was a zero fill then axpy_values, twice the memory traffic on the backward's and
// the step's path).
inline void widen_gradients(const void* stored, DType dtype, float post, float* widened,
                            std::size_t count) {
  host::scale_onto_zero(stored, dtype, widened, count, post);
}

// In place: the `count` stored values at the start of `grads` widened over its `count` fp32
// elements. Back to front by halves: elements [low, high) land on bytes past every stored value
// not widened yet (4 low >= 2 high), so each half is one widen_gradients.
inline void widen_gradients_in_place(void* grads, DType dtype, float post, std::size_t count) {
  constexpr std::size_t kTailElements = 64;
  auto* bytes = static_cast<char*>(grads);
  const std::size_t stored_bytes = size_of(dtype);
  std::size_t high = count;
  while (high > kTailElements) {
    const std::size_t low = (high + 1) / 2;
    widen_gradients(bytes + low * stored_bytes, dtype, post, static_cast<float*>(grads) + low,
                    high - low);
    high = low;
  }
  char tail[kTailElements * sizeof(float)];  // the first values overlap their widened bytes
  std::memcpy(tail, bytes, high * stored_bytes);
  widen_gradients(tail, dtype, post, static_cast<float*>(grads), high);
}

}  // namespace zero
