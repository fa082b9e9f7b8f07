// The CPU backend's arithmetic on host memory, element by element in fp32 (16-bit values widened
// on load, rounded once on store): the reference every backend's results are compared with. The
// CPU device context runs its operations through these loops, and the engine's host-side offload
// step uses the same ones, so an offloaded run's sums equal a CPU-backend run's bit for bit.
#pragma once

#include <cstddef>
#include <span>

#include "zero/core/device_context.h"
#include "zero/core/dtype.h"

namespace zero::host {

void fill_values(void* destination, DType dtype, std::size_t count, float value);
// destination = source × alpha
void scale_values(const void* source, DType source_dtype, void* destination,
                  DType destination_dtype, std::size_t count, float alpha);
// destination (fp32) = 0 + source × alpha: axpy_values into zeros, in one pass over memory (the
// same values, a -0 product giving +0 as there).
void scale_onto_zero(const void* source, DType source_dtype, float* destination, std::size_t count,
                     float alpha);
// y += x × alpha
void axpy_values(const void* x, DType x_dtype, void* y, DType y_dtype, std::size_t count,
                 float alpha);
// Σ x² in double; nonfinite when some element is inf/NaN. fp32 values are summed in blocks of
// kSquaresBlockElements from x[0] (block_squares), then the block sums in block order
// (sum_block_squares), whatever the threads: so the squares of a unit's gradients taken piece by
// piece (offload's sub-groups smaller than a unit), each piece starting at a block boundary, are
// the whole unit's bit for bit. Other dtypes: element by element, in order.
SquaresResult squares_of(const void* x, DType dtype, std::size_t count);
inline constexpr std::size_t kSquaresBlockElements = 256;
// The blocks of `count` fp32 values: ceil(count / kSquaresBlockElements).
constexpr std::size_t squares_blocks(std::size_t count) {
  return (count + kSquaresBlockElements - 1) / kSquaresBlockElements;
}
// Each block's Σ x² (in double) into sums[0, squares_blocks(count)).
void block_squares(const float* x, std::size_t count, double* sums);
// The blocks' sums added in order, as squares_of adds them.
SquaresResult sum_block_squares(std::span<const double> sums);

}  // namespace zero::host
