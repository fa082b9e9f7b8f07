// fp32 <-> bf16/fp16 conversions (round to nearest even) and dtype names.
#include "zero/core/dtype.h"

#include <bit>
#include <cstring>
#include <string>
#include <type_traits>

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

namespace {

// One loop per (source, destination) pair, the element types known to the compiler, so each
// vectorises (the conversions are inline); each element is converted alone, so the threads
// change nothing.
template <typename From, typename To>
void convert_elements(const From* source, To* destination, std::size_t count) {
  auto value_of = [](From x) -> float {
    if constexpr (std::is_same_v<From, float>)
      return x;
    else
      return to_float(x);
  };
#pragma omp parallel for simd schedule(static) if (count > (1 << 16))
  for (std::size_t i = 0; i < count; ++i) {
    const float value = value_of(source[i]);
    if constexpr (std::is_same_v<To, float>)
      destination[i] = value;
    else if constexpr (std::is_same_v<To, BFloat16>)
      destination[i] = to_bf16(value);
    else
      destination[i] = to_fp16(value);
  }
}

template <typename From>
void convert_from(const From* source, void* destination, DType destination_dtype,
                  std::size_t count) {
  switch (destination_dtype) {
    case DType::kFloat32: convert_elements(source, static_cast<float*>(destination), count); return;
    case DType::kBFloat16:
      convert_elements(source, static_cast<BFloat16*>(destination), count);
      return;
    case DType::kFloat16:
      convert_elements(source, static_cast<Float16*>(destination), count);
      return;
  }
}

}  // namespace

void convert(const void* source, DType source_dtype, void* destination, DType destination_dtype,
             std::size_t count) {
  if (source_dtype == destination_dtype) {
    if (count > 0) std::memcpy(destination, source, count * size_of(source_dtype));
    return;
  }
  switch (source_dtype) {
    case DType::kFloat32:
      convert_from(static_cast<const float*>(source), destination, destination_dtype, count);
      return;
    case DType::kBFloat16:
      convert_from(static_cast<const BFloat16*>(source), destination, destination_dtype, count);
      return;
    case DType::kFloat16:
      convert_from(static_cast<const Float16*>(source), destination, destination_dtype, count);
      return;
  }
}

}  // namespace zero
