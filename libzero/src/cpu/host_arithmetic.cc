// The CPU backend's host arithmetic (host_arithmetic.h).
#include "host_arithmetic.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "zero/core/storage_type.h"

namespace zero::host {

namespace {

// Loops over this many elements or more run on OpenMP's threads (each element is computed alone,
// so which thread computes it changes nothing).
constexpr std::size_t kParallelElements = std::size_t{1} << 16;

// destination[i] (of To) = op(x_i, destination_i) rounded once, x and destination widened from
// their storage types (storage_type.h: one loop per pair of types, vectorised).
template <typename Op>
void update_stored(const void* source, DType source_dtype, void* destination,
                   DType destination_dtype, std::size_t count, Op op) {
  storage::visit(source_dtype, [&](auto source_tag) {
    storage::visit(destination_dtype, [&](auto destination_tag) {
      using From = decltype(source_tag);
      using To = decltype(destination_tag);
      const auto* x = static_cast<const From*>(source);
      auto* y = static_cast<To*>(destination);
#pragma omp parallel for simd schedule(static) if (count >= kParallelElements)
      for (std::size_t i = 0; i < count; ++i)
        y[i] = storage::narrow<To>(op(storage::widen(x[i]), storage::widen(y[i])));
    });
  });
}

}  // namespace

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
  update_stored(source, source_dtype, destination, destination_dtype, count,
                [alpha](float x, float) { return x * alpha; });
}

void scale_onto_zero(const void* source, DType source_dtype, float* destination, std::size_t count,
                     float alpha) {
  update_stored(source, source_dtype, destination, DType::kFloat32, count,
                [alpha](float x, float) { return 0.0f + x * alpha; });
}

void axpy_values(const void* x, DType x_dtype, void* y, DType y_dtype, std::size_t count,
                 float alpha) {
  update_stored(x, x_dtype, y, y_dtype, count,
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
