// What GPT2Compute's files (compute.cc: layout, inputs, loss; compute_passes.cc: the passes)
// share.
#pragma once

#include <cstdint>

#include "zero/gpt2/config.h"
#include "zero/gpt2/family.h"

namespace zero::gpt2 {

// fp32 elements of a block's vectors (norm weights and biases), in BlockTensors order for GPT-2;
// the Llama family's 1-D tensors (family.h).
inline std::int64_t block_vector_elements(const GPT2Config& config) {
  if (config.family == ModelFamily::kGpt2) return 9 * config.n_embd + config.hidden_size();
  std::int64_t count = 0;
  for (const TensorSpec& tensor : block_tensors(config))
    if (tensor.shape.size() == 1) count += tensor.shape[0];
  return count;
}

}  // namespace zero::gpt2
