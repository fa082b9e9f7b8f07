// The CPU backend's host arithmetic (host_arithmetic.h).
#include "host_arithmetic.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "zero/core/storage_type.h"

namespace zero::host {

void fill_values(void* destination, DType dtype, std::size_t count, float value) {
  if (count == 0) return;
  if (value == 0.0f && !std::signbit(value)) {
    std::memset(destination, 0, count * size_of(dtype));  // +0 is all-zero bits in every dtype
    return;
  }
  storage::visit(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T stored = storage::narrow<T>(value);
    std::fill_n(static_cast<T*>(destination), count, stored);
  });
}

void scale_values(const void* source, DType source_dtype, void* destination,
                  DType destination_dtype, std::size_t count, float alpha) {
  storage::transform(source, source_dtype, destination, destination_dtype, count,
                     [alpha](float x, float) { return x * alpha; });
}

void scale_onto_zero(const void* source, DType source_dtype, float* destination, std::size_t count,
                     float alpha) {
  storage::transform(source, source_dtype, destination, DType::kFloat32, count,
                     [alpha](float x, float) { return 0.0f + x * alpha; });
}

void axpy_values(const void* x, DType x_dtype, void* y, DType y_dtype, std::size_t count,
                 float alpha) {
  storage::transform(x, x_dtype, y, y_dtype, count,
                     [alpha](float value, float y_value) { return y_value + value * alpha; });
}

void block_squares(const float* x, std::size_t count, double* sums) {
  const std::size_t blocks = squares_blocks(count);
#pragma omp parallel for schedule(static) if (count >= (1u << 16))
  for (std::size_t b = 0; b < blocks; ++b) {
    const float* values = x + b * kSquaresBlockElements;
    const std::size_t size = std::min(kSquaresBlockElements, count - b * kSquaresBlockElements);
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (std::size_t i = 0; i < size; ++i) sum += static_cast<double>(values[i]) * values[i];
    sums[b] = sum;
  }
}

SquaresResult sum_block_squares(std::span<const double> sums) {
  double sum = 0.0;
  for (const double block : sums) sum += block;
  return {sum, !std::isfinite(sum)};
}

// In double; a finite fp32/bf16/fp16 value squares to at most ~1.2e77, so the sum is inf/NaN
// exactly when some element is.
SquaresResult squares_of(const void* x, DType dtype, std::size_t count) {
  if (dtype == DType::kFloat32) {
    std::vector<double> sums(squares_blocks(count));
    block_squares(static_cast<const float*>(x), count, sums.data());
    return sum_block_squares(sums);
  }
  double sum = 0.0;
  storage::visit(dtype, [&](auto tag) {  // in element order, as before
    const auto* values = static_cast<const decltype(tag)*>(x);
    for (std::size_t i = 0; i < count; ++i) {
      const double value = storage::widen(values[i]);
      sum += value * value;
    }
  });
  return {sum, !std::isfinite(sum)};
}

}  // namespace zero::host
