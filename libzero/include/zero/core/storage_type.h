// Loops over arrays of a runtime DType with their element types known to the compiler: one switch
// per call (visit, transform), the conversions inline (zero/core/dtype.h), so each loop
// vectorises. Includers compile with OpenMP (libzero does). What
// zero::convert and the CPU backend's host arithmetic are written with. (In a namespace of its
// own: argument-dependent lookup on a DType argument would otherwise find `visit` beside other
// dispatchers, such as the CUDA kernels' with_storage_type.)
#pragma once

#include <cstddef>
#include <type_traits>

#include "zero/core/dtype.h"

namespace zero::storage {

// A stored value widened exactly to fp32.
inline float widen(float value) { return value; }
inline float widen(BFloat16 value) { return to_float(value); }
inline float widen(Float16 value) { return to_float(value); }

// An fp32 value rounded once (to nearest even) into storage type T (float: itself).
template <typename T>
inline T narrow(float value) {
  if constexpr (std::is_same_v<T, float>)
    return value;
  else if constexpr (std::is_same_v<T, BFloat16>)
    return to_bf16(value);
  else
    return to_fp16(value);
}

// f(tag), tag a value of `dtype`'s storage type (float, BFloat16 or Float16).
template <typename F>
void visit(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat32: f(float{}); return;
    case DType::kBFloat16: f(BFloat16{}); return;
    case DType::kFloat16: f(Float16{}); return;
  }
}

// y[i] = op(x_i, y_i) rounded once into y's storage type, x and y widened from theirs (x of
// source_dtype, y of destination_dtype, `count` elements; op(float, float) -> float): one loop
// per pair of types, vectorised, on OpenMP's threads from 2^16 elements (each element is
// computed alone, so the threads change nothing). In place when source is destination.
template <typename Op>
void transform(const void* source, DType source_dtype, void* destination, DType destination_dtype,
               std::size_t count, Op op) {
  visit(source_dtype, [&](auto source_tag) {
    visit(destination_dtype, [&](auto destination_tag) {
      using From = decltype(source_tag);
      using To = decltype(destination_tag);
      const auto* x = static_cast<const From*>(source);
      auto* y = static_cast<To*>(destination);
#pragma omp parallel for simd schedule(static) if (count >= (std::size_t{1} << 16))
      for (std::size_t i = 0; i < count; ++i) y[i] = narrow<To>(op(widen(x[i]), widen(y[i])));
    });
  });
}

}  // namespace zero::storage
