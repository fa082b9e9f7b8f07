// Element-wise reduction kernels shared by the CPU communicators (internal).
#pragma once

#include <cstddef>

#include "zero/comm/communicator.h"

namespace zero::detail {

// accumulator[i] = accumulator[i] (op) source[i] for sum and max, in fp32, for `count` elements of
// `dtype` in `source`. Avg accumulates as a sum; finish_reduction divides.
void accumulate(float* accumulator, const void* source, DType dtype, ReduceOp op,
                std::size_t count);
// destination[i] = accumulator[i] (÷ world_size for avg), converted to `dtype`.
void finish_reduction(const float* accumulator, void* destination, DType dtype, ReduceOp op,
                      int world_size, std::size_t count);
// In place on `count` elements of `dtype`: data[i] = data[i] / divisor.
void divide(void* data, DType dtype, std::size_t count, int divisor);

}  // namespace zero::detail
