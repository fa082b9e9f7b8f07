// fp32 <-> bf16/fp16 conversions (round to nearest even) and dtype names.
#include "zero/core/dtype.h"

#include <bit>
#include <cstring>
#include <string>

#include "zero/core/error.h"

namespace zero {

std::string_view name_of(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "fp32";
    case DType::kBFloat16: return "bf16";
    case DType::kFloat16: return "fp16";
  }
  return "unknown";
}

DType parse_dtype(std::string_view text) {
  if (text == "fp32" || text == "float32" || text == "float") return DType::kFloat32;
  if (text == "bf16" || text == "bfloat16") return DType::kBFloat16;
  if (text == "fp16" || text == "float16" || text == "half") return DType::kFloat16;
  ZERO_THROW("unknown dtype '", text, "': expected fp32, bf16 or fp16");
}

BFloat16 to_bf16(float value) {
  std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep sign, force quiet
    return {static_cast<std::uint16_t>((bits >> 16) | 0x0040u)};
  }
  const std::uint32_t rounding_bias = 0x7fffu + ((bits >> 16) & 1u);
  return {static_cast<std::uint16_t>((bits + rounding_bias) >> 16)};
}

float to_float(BFloat16 value) { return std::bit_cast<float>(std::uint32_t{value.bits} << 16); }

Float16 to_fp16(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return {static_cast<std::uint16_t>(sign | 0x7e00u)};  // NaN
  if (magnitude >= 0x47800000u)
    return {static_cast<std::uint16_t>(sign | 0x7c00u)};  // >= 65536: inf
  if (magnitude < 0x38800000u) {                          // below 2^-14: fp16 subnormal or zero
    // Add 0.5 (as float) so the FPU rounds the mantissa to the subnormal grid, nearest even.
    const float shifted = std::bit_cast<float>(magnitude) + 0.5f;
    return {
        static_cast<std::uint16_t>(sign | (std::bit_cast<std::uint32_t>(shifted) - 0x3f000000u))};
  }
  // Normal: rebias exponent (127 -> 15), round 13 dropped mantissa bits to nearest even.
  const std::uint32_t odd = (magnitude >> 13) & 1u;
  std::uint32_t rounded = magnitude + 0xc8000fffu + odd;  // -(112 << 23) + 0xfff + odd
  return {static_cast<std::uint16_t>(sign | (rounded >> 13))};
}

float to_float(Float16 value) {
  const std::uint32_t sign = std::uint32_t{value.bits & 0x8000u} << 16;
  const std::uint32_t exponent = (value.bits >> 10) & 0x1fu;
  const std::uint32_t mantissa = value.bits & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    // Subnormal or zero: mantissa · 2^-24, exact in fp32.
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return std::bit_cast<float>(sign | std::bit_cast<std::uint32_t>(magnitude));
  }
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

void convert(const void* source, DType source_dtype, void* destination, DType destination_dtype,
             std::size_t count) {
  if (source_dtype == destination_dtype) {
    if (count > 0) std::memcpy(destination, source, count * size_of(source_dtype));
    return;
  }
  auto load = [&](std::size_t i) -> float {
    switch (source_dtype) {
      case DType::kFloat32: return static_cast<const float*>(source)[i];
      case DType::kBFloat16: return to_float(static_cast<const BFloat16*>(source)[i]);
      case DType::kFloat16: return to_float(static_cast<const Float16*>(source)[i]);
    }
    return 0.0f;
  };
#pragma omp parallel for schedule(static) if (count > (1 << 16))
  for (std::size_t i = 0; i < count; ++i) {
    const float value = load(i);
    switch (destination_dtype) {
      case DType::kFloat32: static_cast<float*>(destination)[i] = value; break;
      case DType::kBFloat16: static_cast<BFloat16*>(destination)[i] = to_bf16(value); break;
      case DType::kFloat16: static_cast<Float16*>(destination)[i] = to_fp16(value); break;
    }
  }
}

}  // namespace zero
