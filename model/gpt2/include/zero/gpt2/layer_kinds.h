// The decoder's layer choices a family makes (family.h) and the kernels take (kernels.h): its norm,
// its MLP and its position encoding. One definition for both.
#pragma once

#include <cstdint>

namespace zero::gpt2 {

enum class NormKind : std::uint8_t { kLayerNorm, kRmsNorm };
enum class MlpKind : std::uint8_t { kGelu, kSwiGlu };
enum class PositionKind : std::uint8_t { kLearned, kRope };

}  // namespace zero::gpt2
