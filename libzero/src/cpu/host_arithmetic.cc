// The CPU backend's host arithmetic (host_arithmetic.h).
#include "host_arithmetic.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace zero::host {

float load(const void* data, DType dtype, std::size_t i) {
  switch (dtype) {
    case DType::kFloat32: return static_cast<const float*>(data)[i];
    case DType::kBFloat16: return to_float(static_cast<const BFloat16*>(data)[i]);
    case DType::kFloat16: return to_float(static_cast<const Float16*>(data)[i]);
  }
  return 0.0f;
}

void store(void* data, DType dtype, std::size_t i, float value) {
  switch (dtype) {
    case DType::kFloat32: static_cast<float*>(data)[i] = value; break;
    case DType::kBFloat16: static_cast<BFloat16*>(data)[i] = to_bf16(value); break;
    case DType::kFloat16: static_cast<Float16*>(data)[i] = to_fp16(value); break;
  }
}

namespace {

// Loops over this many elements or more run on OpenMP's threads (each element is computed alone,
// so which thread computes it changes nothing).
constexpr std::size_t kParallelElements = std::size_t{1} << 16;

// Storage types widened exactly and rounded once (zero/core/dtype.h's inline conversions).
inline float widen(float value) { return value; }
inline float widen(BFloat16 value) { return to_float(value); }
inline float widen(Float16 value) { return to_float(value); }
template <typename T>
inline T narrow(float value) {
  if constexpr (std::is_same_v<T, float>)
    return value;
  else if constexpr (std::is_same_v<T, BFloat16>)
    return to_bf16(value);
  else
    return to_fp16(value);
}

// f(tag) with tag a value of `dtype`'s storage type: one switch per call, not per element, so
// the loops inside see their element types.
template <typename F>
void with_storage_type(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat32: f(float{}); return;
    case DType::kBFloat16: f(BFloat16{}); return;
    case DType::kFloat16: f(Float16{}); return;
  }
}

// destination[i] = op(x_i, destination[i]) over fp32 destinations, with x read as fp32 from
// `source` of `dtype`: fp32 and bf16 in vector loops, fp16 through load.
template <typename Op>
void update_fp32(const void* source, DType dtype, float* destination, std::size_t count, Op op) {
  switch (dtype) {
    case DType::kFloat32: {
      const auto* x = static_cast<const float*>(source);
#pragma omp parallel for simd schedule(static) if (count >= kParallelElements)
      for (std::size_t i = 0; i < count; ++i) destination[i] = op(x[i], destination[i]);
      return;
    }
    case DType::kBFloat16: {
      const auto* x = static_cast<const BFloat16*>(source);
#pragma omp parallel for simd schedule(static) if (count >= kParallelElements)
      for (std::size_t i = 0; i < count; ++i) destination[i] = op(widen(x[i]), destination[i]);
      return;
    }
    case DType::kFloat16: {
      const auto* x = static_cast<const Float16*>(source);
#pragma omp parallel for simd schedule(static) if (count >= kParallelElements)
      for (std::size_t i = 0; i < count; ++i) destination[i] = op(widen(x[i]), destination[i]);
      return;
    }
  }
}

// destination[i] (of To) = op(x_i, destination_i) rounded once, x and destination widened from
// their storage types: the 16-bit destinations' loop (fp32 ones take update_fp32).
template <typename Op>
void update_stored(const void* source, DType source_dtype, void* destination,
                   DType destination_dtype, std::size_t count, Op op) {
  with_storage_type(source_dtype, [&](auto source_tag) {
    with_storage_type(destination_dtype, [&](auto destination_tag) {
      using From = decltype(source_tag);
      using To = decltype(destination_tag);
      const auto* x = static_cast<const From*>(source);
      auto* y = static_cast<To*>(destination);
#pragma omp parallel for simd schedule(static) if (count >= kParallelElements)
      for (std::size_t i = 0; i < count; ++i) y[i] = narrow<To>(op(widen(x[i]), widen(y[i])));
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
  with_storage_type(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T stored = narrow<T>(value);
    std::fill_n(static_cast<T*>(destination), count, stored);
  });
}

void scale_values(const void* source, DType source_dtype, void* destination,
                  DType destination_dtype, std::size_t count, float alpha) {
  if (destination_dtype == DType::kFloat32) {
    update_fp32(source, source_dtype, static_cast<float*>(destination), count,
                [alpha](float x, float) { return x * alpha; });
    return;
  }
  update_stored(source, source_dtype, destination, destination_dtype, count,
                [alpha](float x, float) { return x * alpha; });
}

void scale_onto_zero(const void* source, DType source_dtype, float* destination, std::size_t count,
                     float alpha) {
  update_fp32(source, source_dtype, destination, count,
              [alpha](float x, float) { return 0.0f + x * alpha; });
}

void axpy_values(const void* x, DType x_dtype, void* y, DType y_dtype, std::size_t count,
                 float alpha) {
  if (y_dtype == DType::kFloat32) {
    update_fp32(x, x_dtype, static_cast<float*>(y), count,
                [alpha](float value, float y_value) { return y_value + value * alpha; });
    return;
  }
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
    with_storage_type(dtype, [&](auto tag) {  // in element order, as before
      const auto* values = static_cast<const decltype(tag)*>(x);
      for (std::size_t i = 0; i < count; ++i) {
        const double value = widen(values[i]);
        sum += value * value;
      }
    });
  }
  return {sum, !std::isfinite(sum)};
}

}  // namespace zero::host
