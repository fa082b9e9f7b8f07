// Element-wise reductions for the CPU communicators: fp32 accumulation, one rounding at the end.
#include "reduce.h"

#include <algorithm>

namespace zero::detail {

namespace {
template <typename Load>
void accumulate_with(float* accumulator, ReduceOp op, std::size_t count, Load load) {
  if (op == ReduceOp::kMax) {
    for (std::size_t i = 0; i < count; ++i) accumulator[i] = std::max(accumulator[i], load(i));
  } else {
    for (std::size_t i = 0; i < count; ++i) accumulator[i] += load(i);
  }
}
}  // namespace

void accumulate(float* accumulator, const void* source, DType dtype, ReduceOp op,
                std::size_t count) {
  switch (dtype) {
    case DType::kFloat32: {
      auto* s = static_cast<const float*>(source);
      accumulate_with(accumulator, op, count, [s](std::size_t i) { return s[i]; });
      break;
    }
    case DType::kBFloat16: {
      auto* s = static_cast<const BFloat16*>(source);
      accumulate_with(accumulator, op, count, [s](std::size_t i) { return to_float(s[i]); });
      break;
    }
    case DType::kFloat16: {
      auto* s = static_cast<const Float16*>(source);
      accumulate_with(accumulator, op, count, [s](std::size_t i) { return to_float(s[i]); });
      break;
    }
  }
}

void finish_reduction(const float* accumulator, void* destination, DType dtype, ReduceOp op,
                      int world_size, std::size_t count) {
  if (op != ReduceOp::kAvg) {
    convert(accumulator, DType::kFloat32, destination, dtype, count);
    return;
  }
  const float divisor = static_cast<float>(world_size);
  switch (dtype) {
    case DType::kFloat32: {
      auto* d = static_cast<float*>(destination);
      for (std::size_t i = 0; i < count; ++i) d[i] = accumulator[i] / divisor;
      break;
    }
    case DType::kBFloat16: {
      auto* d = static_cast<BFloat16*>(destination);
      for (std::size_t i = 0; i < count; ++i) d[i] = to_bf16(accumulator[i] / divisor);
      break;
    }
    case DType::kFloat16: {
      auto* d = static_cast<Float16*>(destination);
      for (std::size_t i = 0; i < count; ++i) d[i] = to_fp16(accumulator[i] / divisor);
      break;
    }
  }
}

void divide(void* data, DType dtype, std::size_t count, int divisor) {
  const float divisor_f = static_cast<float>(divisor);
  switch (dtype) {
    case DType::kFloat32: {
      auto* d = static_cast<float*>(data);
      for (std::size_t i = 0; i < count; ++i) d[i] /= divisor_f;
      break;
    }
    case DType::kBFloat16: {
      auto* d = static_cast<BFloat16*>(data);
      for (std::size_t i = 0; i < count; ++i) d[i] = to_bf16(to_float(d[i]) / divisor_f);
      break;
    }
    case DType::kFloat16: {
      auto* d = static_cast<Float16*>(data);
      for (std::size_t i = 0; i < count; ++i) d[i] = to_fp16(to_float(d[i]) / divisor_f);
      break;
    }
  }
}

}  // namespace zero::detail
