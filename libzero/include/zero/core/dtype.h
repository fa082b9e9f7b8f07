// Element types zero stores and moves: fp32, bf16, fp16, with exact conversions to and from fp32.
#pragma once

#include <cstddef>
#include <cstdint>
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

BFloat16 to_bf16(float value);
float to_float(BFloat16 value);
Float16 to_fp16(float value);
float to_float(Float16 value);

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
