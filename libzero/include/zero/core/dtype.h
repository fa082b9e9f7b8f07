// Element types zero stores and moves: fp32, bf16, fp16, with exact conversions to and from fp32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace zero {

enum class DType : std::uint8_t { kFloat32, kBFloat16, kFloat16 };

// Bytes per element.
constexpr std::size_t size_of(DType dtype) { return dtype == DType::kFloat32 ? 4 : 2; }

// "fp32", "bf16", "fp16".
std::string_view name_of(DType dtype);

// Parses "fp32"/"float32"/"float", "bf16"/"bfloat16", "fp16"/"float16"/"half"; throws zero::Error
// naming the accepted spellings otherwise.
DType parse_dtype(std::string_view text);

// bf16 and fp16 as 16-bit patterns. Conversions from fp32 round to nearest even; NaN stays NaN
// (quiet), infinities and signed zeros are kept, fp16 handles subnormals and overflows to inf.
struct BFloat16 {
  std::uint16_t bits;
};
struct Float16 {
  std::uint16_t bits;
};

namespace dtype_detail {
// std::bit_cast for C++17 translation units too (nvcc compiles libzero's CUDA sources as C++17).
inline std::uint32_t bits_of(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}
inline float float_of(std::uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}
}  // namespace dtype_detail

// Inline, so that the loops converting arrays (convert, the host arithmetic, the kernels'
// conversions) vectorise: out of line, one call per element was the largest single cost of a
// host step's parameter conversions (perf, GPT-2 at XL width on 2 cores).
inline BFloat16 to_bf16(float value) {
  const std::uint32_t bits = dtype_detail::bits_of(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u)  // NaN: keep sign, force quiet
    return {static_cast<std::uint16_t>((bits >> 16) | 0x0040u)};
  const std::uint32_t rounding_bias = 0x7fffu + ((bits >> 16) & 1u);
  return {static_cast<std::uint16_t>((bits + rounding_bias) >> 16)};
}

inline float to_float(BFloat16 value) {
  return dtype_detail::float_of(std::uint32_t{value.bits} << 16);
}

inline Float16 to_fp16(float value) {
  const std::uint32_t bits = dtype_detail::bits_of(value);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return {static_cast<std::uint16_t>(sign | 0x7e00u)};  // NaN
  if (magnitude >= 0x47800000u)
    return {static_cast<std::uint16_t>(sign | 0x7c00u)};  // >= 65536: inf
  if (magnitude < 0x38800000u) {                          // below 2^-14: fp16 subnormal or zero
    // Add 0.5 (as float) so the FPU rounds the mantissa to the subnormal grid, nearest even.
    const float shifted = dtype_detail::float_of(magnitude) + 0.5f;
    return {static_cast<std::uint16_t>(sign | (dtype_detail::bits_of(shifted) - 0x3f000000u))};
  }
  // Normal: rebias exponent (127 -> 15), round 13 dropped mantissa bits to nearest even.
  const std::uint32_t odd = (magnitude >> 13) & 1u;
  const std::uint32_t rounded = magnitude + 0xc8000fffu + odd;  // -(112 << 23) + 0xfff + odd
  return {static_cast<std::uint16_t>(sign | (rounded >> 13))};
}

inline float to_float(Float16 value) {
  const std::uint32_t sign = std::uint32_t{value.bits & 0x8000u} << 16;
  const std::uint32_t exponent = (value.bits >> 10) & 0x1fu;
  const std::uint32_t mantissa = value.bits & 0x3ffu;
  if (exponent == 0x1f) return dtype_detail::float_of(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    // Subnormal or zero: mantissa · 2^-24, exact in fp32.
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return dtype_detail::float_of(sign | dtype_detail::bits_of(magnitude));
  }
  return dtype_detail::float_of(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

// The DType of a storage type: float, BFloat16, Float16.
template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::kFloat32;
}
template <>
constexpr DType dtype_of<BFloat16>() {
  return DType::kBFloat16;
}
template <>
constexpr DType dtype_of<Float16>() {
  return DType::kFloat16;
}

// Converts `count` elements from `source` (of `source_dtype`) into `destination` (of
// `destination_dtype`). Same dtype is a copy. Buffers must not overlap.
void convert(const void* source, DType source_dtype, void* destination, DType destination_dtype,
             std::size_t count);

}  // namespace zero
