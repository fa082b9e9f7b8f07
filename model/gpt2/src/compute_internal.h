// What GPT2Compute's files (compute.cc: layout, inputs, loss; compute_passes.cc: the passes)
// share.
#pragma once

#include <cstdint>

#include "zero/gpt2/config.h"

namespace zero::gpt2 {

// fp32 elements of a block's vectors (layer norms and biases), in BlockTensors order.
inline std::int64_t block_vector_elements(const GPT2Config& config) {
  return 9 * config.n_embd + config.hidden_size();
}

}  // namespace zero::gpt2
