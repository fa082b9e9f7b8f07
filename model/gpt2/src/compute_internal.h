// What GPT2Compute's files (compute.cc: layout, inputs, loss; compute_passes.cc: the passes)
// share: where a block's tensors lie in its unit, for either family, and their views.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "zero/core/stream.h"
#include "zero/gpt2/compute.h"
#include "zero/gpt2/config.h"
#include "zero/gpt2/family.h"
#include "zero/gpt2/kernels.h"

namespace zero::gpt2 {

// One role's tensor (or fused tensors, family.h's BlockRole) in a block unit: its offset in the
// unit (elements; -1 when the family has no such tensor) and, for a vector (a 1-D tensor: norm
// weights and biases), its offset in the fp32 staging of a 16-bit unit's vectors, which holds the
// unit's 1-D tensors back to back in unit order (so fused biases stay adjacent there too).
struct BlockSlot {
  std::int64_t offset = -1;
  std::int64_t staged = -1;
  bool present() const { return offset >= 0; }
};
struct BlockVector {
  std::int64_t offset, staged, elements;
};
struct BlockLayout {
  std::array<BlockSlot, kBlockRoles> roles;
  std::vector<BlockVector> vectors;  // every 1-D tensor, in unit order
  std::int64_t vector_elements = 0;
  const BlockSlot& operator[](BlockRole role) const { return roles[static_cast<int>(role)]; }
};
// From block_tensors(config) (offsets are cumulative: units.h) and block_role.
BlockLayout block_layout(const GPT2Config& config);

// fp32 elements of a block's vectors (norm weights and biases): the 16-bit staging's size.
inline std::int64_t block_vector_elements(const GPT2Config& config) {
  return block_layout(config).vector_elements;
}

// The final unit's norm (units.h: its vectors lead the unit) from those vectors in fp32: the
// weight, then a layer norm's bias; and how many fp32 elements they are (2C, or C for RMSNorm).
// The LM head (compute_passes.cc) and the classifier's (classifier_head.cc) read it so.
Norm final_unit_norm(const GPT2Config& config, const float* vectors);
std::int64_t final_norm_elements(const GPT2Config& config);

// A block's parameters as the passes read them: vectors fp32 (the unit's own, or widened into
// the staging for 16-bit units), matrices in the unit's dtype, absent tensors null. qkv_stored_bias
// is q/k/v's bias in the unit's dtype (a 16-bit qkv's GEMM adds a bias of its own dtype).
struct BlockParams {
  Norm norm1, norm2;
  const float *qkv_bias, *out_bias, *mlp_in_bias, *mlp_out_bias;
  const void *qkv_weight, *out_weight, *mlp_in_weight, *mlp_out_weight;
  const void* qkv_stored_bias;
};
// A block unit's parameters through `kernels` on `stream`: an fp32 unit's point into it; a 16-bit
// unit's vectors are widened into `staging` (BlockLayout::vector_elements floats) first. Used by
// GPT2Compute's passes and the decoder's (decode.cc).
BlockParams block_params(Kernels& kernels, Stream& stream, const ConstUnitData& unit,
                         const GPT2Config& config, const BlockLayout& layout, float* staging);

// Gradients: vectors fp32 (the unit's, or zeroed staging a 16-bit unit adds back once), matrices
// in the gradients' dtype.
struct BlockGrads {
  float *norm1_weight, *norm1_bias, *norm2_weight, *norm2_bias;
  float *qkv_bias, *out_bias, *mlp_in_bias, *mlp_out_bias;
  void *qkv_weight, *out_weight, *mlp_in_weight, *mlp_out_weight;
};

}  // namespace zero::gpt2
