// The CUDA optimizer step's host side without a device: cuda::fused_step through host_passes()
// runs the device step's own coefficients, element rules (optimizer_kernels.cu's, in host loops),
// 16-bit handling and Lamb bookkeeping, through device_optimizer_checks.h's matrix against
// Optimizer::step on the CPU context's buffers. What only a GPU checks (label cuda,
// optim_cuda_test): the kernels' indexing, vector loads and reductions.
#include <gtest/gtest.h>

#include <span>
#include <string>
#include <vector>

#include "cuda_optimizer.h"
#include "device_optimizer_checks.h"
#include "zero/core/error.h"
#include "zero/optim/optimizers.h"

namespace zero {
namespace {

// optim/'s optimizer `optimizer` stepped as on CUDA, with the passes on the host.
void emulate_cuda_step(Optimizer& optimizer, std::span<ShardChunk> chunks,
                       const OptimizerStep& step) {
  auto passes = optim::cuda::host_passes();
  if (auto* adam = dynamic_cast<optim::Adam*>(&optimizer))
    optim::cuda::fused_step(*passes, adam->name(), chunks, step, adam->hyperparams(step));
  else if (auto* sgd = dynamic_cast<optim::Sgd*>(&optimizer))
    optim::cuda::fused_step(*passes, sgd->name(), chunks, step, sgd->hyperparams(step));
  else if (auto* lamb = dynamic_cast<optim::Lamb*>(&optimizer))
    optim::cuda::fused_step(*passes, lamb->name(), chunks, step, lamb->hyperparams(step));
  else
    FAIL() << "no CUDA step for " << optimizer.name();
}

TEST(OptimizerCudaEmulation, DeviceStepArithmeticMatchesTheCpuKernels) {
  auto context = make_cpu_context(StreamStress{});
  // Without the 65541-element case: host loops element by element (the GPU test has it).
  testing::check_device_optimizers(*context, {{1, 1}, {22, 7}, {1023, 4099}}, emulate_cuda_step);
}

TEST(OptimizerCudaEmulation, RefusesBadChunks) {
  config::OptimizerConfig options;
  options.type = config::OptimizerType::kAdamW;
  auto optimizer = optim::make_optimizer(options);
  std::vector<float> params(4), grads(4), state(8);
  std::vector<ShardChunk> chunks(1);
  chunks[0].params = params.data();
  chunks[0].state = state.data();
  chunks[0].num_elements = 4;
  try {  // neither gradient
    emulate_cuda_step(*optimizer, chunks, OptimizerStep{});
    FAIL() << "expected zero::Error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("neither"), std::string::npos) << error.what();
  }
  chunks[0].grads = grads.data();
  chunks[0].segments = {{2, 3, 0}};  // [2, 5) past the chunk's 4 elements
  EXPECT_THROW(emulate_cuda_step(*optimizer, chunks, OptimizerStep{}), Error);
  chunks[0].segments.clear();
  chunks[0].state = nullptr;
  EXPECT_THROW(emulate_cuda_step(*optimizer, chunks, OptimizerStep{}), Error);
}

}  // namespace
}  // namespace zero
