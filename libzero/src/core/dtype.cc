// fp32 <-> bf16/fp16 conversions (round to nearest even) and dtype names.
#include "zero/core/dtype.h"

#include <cstring>
#include <string>

#include "zero/core/error.h"
#include "zero/core/storage_type.h"

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

void convert(const void* source, DType source_dtype, void* destination, DType destination_dtype,
             std::size_t count) {
  if (source_dtype == destination_dtype) {
    if (count > 0) std::memcpy(destination, source, count * size_of(source_dtype));
    return;
  }
  storage::transform(source, source_dtype, destination, destination_dtype, count,
                     [](float x, float) { return x; });
}

}  // namespace zero
