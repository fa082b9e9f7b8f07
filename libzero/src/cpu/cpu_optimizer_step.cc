// Optimizer::step_on's default: the CPU backend's optimizer step, the optimizer's own host step()
// run on the context's stream (16-bit gradients widened first); nothing on a planning context.
#include <memory>
#include <vector>

#include "zero/core/device_context.h"
#include "zero/core/error.h"
#include "zero/core/optimizer.h"

namespace zero {

void Optimizer::step_on(DeviceContext& context, Stream& stream, std::span<ShardChunk> chunks,
                        const OptimizerStep& step) {
  if (context.planning()) return;
  ZERO_CHECK(context.device().kind == DeviceKind::kCpu, "optimizer '", name(),
             "' has CPU kernels only, so it cannot step on ", context.device().to_string(),
             " (the ", context.backend(), " backend, stream '", stream.name(),
             "'); Adam, AdamW, SGD and Lamb can");
  auto owned = std::make_shared<std::vector<ShardChunk>>(chunks.begin(), chunks.end());
  for (const ShardChunk& chunk : *owned) {
    ZERO_CHECK(
        chunk.num_elements == 0 || (chunk.grads == nullptr) != (chunk.grads_16bit == nullptr),
        name(), " step: a chunk needs exactly one of grads and grads_16bit");
    ZERO_CHECK((chunk.grads_16bit == nullptr || chunk.grads_16bit_dtype != DType::kFloat32) &&
                   (chunk.params_16bit == nullptr || chunk.params_16bit_dtype != DType::kFloat32),
               name(), " step: grads_16bit/params_16bit must be bf16 or fp16");
  }
  stream.submit([this, owned, step] {
    // 16-bit gradients widened first; the 16-bit parameter copy is written by the optimizer's
    // own pass (optim/'s kernels).
    std::vector<std::vector<float>> widened;
    for (ShardChunk& chunk : *owned) {
      if (chunk.grads_16bit == nullptr) continue;
      widened.emplace_back(chunk.num_elements);
      zero::convert(chunk.grads_16bit, chunk.grads_16bit_dtype, widened.back().data(),
                    DType::kFloat32, chunk.num_elements);
      chunk.grads = widened.back().data();
    }
    this->step(*owned, step);
  });
}

}  // namespace zero
