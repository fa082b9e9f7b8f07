// The decoder's layer choices a family makes (family.h) and the kernels take (kernels.h): its norm,
// its MLP, its position encoding and how it stores a linear layer's weight. One definition for
// both.
#pragma once

#include <cstdint>

namespace zero::gpt2 {

enum class NormKind : std::uint8_t { kLayerNorm, kRmsNorm };
enum class MlpKind : std::uint8_t { kGelu, kSwiGlu };
enum class PositionKind : std::uint8_t { kLearned, kRope };
// A linear layer's weight: Conv1D's [in, out] row-major (GPT-2: y = x · W) or nn.Linear's
// [out, in] (the Llama family: y = x · Wᵀ). Each is what Hugging Face stores, so weights load and
// save without transposes; the GEMMs take either.
enum class WeightLayout : std::uint8_t { kInOut, kOutIn };

}  // namespace zero::gpt2
