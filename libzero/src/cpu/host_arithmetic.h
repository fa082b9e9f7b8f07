// The CPU backend's arithmetic on host memory, element by element in fp32 (16-bit values widened
// on load, rounded once on store): the reference every backend's results are compared with. The
// CPU device context runs its operations through these loops, and the engine's host-side offload
// step uses the same ones, so an offloaded run's sums equal a CPU-backend run's bit for bit.
#pragma once

#include <cstddef>

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
// Σ x² in double; nonfinite when some element is inf/NaN.
SquaresResult squares_of(const void* x, DType dtype, std::size_t count);

}  // namespace zero::host
