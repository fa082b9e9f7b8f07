// The CPU backend's host arithmetic (host_arithmetic.h).
#include "host_arithmetic.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

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

// In double; a finite fp32/bf16/fp16 value squares to at most ~1.2e77, so the sum is inf/NaN
// exactly when some element is.
SquaresResult squares_of(const void* x, DType dtype, std::size_t count) {
  double sum = 0.0;
  if (dtype == DType::kFloat32) {
    const auto* values = static_cast<const float*>(x);
#pragma omp parallel for simd reduction(+ : sum) schedule(static) if (count >= (1u << 16))
    for (std::size_t i = 0; i < count; ++i) sum += static_cast<double>(values[i]) * values[i];
  } else {
    storage::visit(dtype, [&](auto tag) {  // in element order, as before
      const auto* values = static_cast<const decltype(tag)*>(x);
      for (std::size_t i = 0; i < count; ++i) {
        const double value = storage::widen(values[i]);
        sum += value * value;
      }
    });
  }
  return {sum, !std::isfinite(sum)};
}

}  // namespace zero::host
