// The CUDA optimizer step's host side without a device: cuda::optimizer_step_on_host runs the
// device step's own coefficients, element rules (optimizer_kernels.cu's, in host loops), 16-bit
// handling and Lamb bookkeeping, behind a DeviceContext that is the CPU backend otherwise, through
// device_optimizer_checks.h's matrix against Optimizer::step. What only a GPU checks (label cuda,
// optim_cuda_test): the kernels' indexing, vector loads and reductions.
#include <gtest/gtest.h>

#include "../common/forwarding_context.h"
#include "cuda_optimizer.h"
#include "device_optimizer_checks.h"
#include "zero/core/error.h"

namespace zero {
namespace {

// The CPU context with the CUDA backend's optimizer step, emulated on the host.
class EmulatedCudaOptimizerContext final : public testing::ForwardingContext {
 public:
  EmulatedCudaOptimizerContext() : ForwardingContext(make_cpu_context(StreamStress{})) {}
  std::string_view backend() const override { return "cuda-emulated-optimizer"; }
  void optimizer_step(Stream& stream, Optimizer& optimizer, std::span<ShardChunk> chunks,
                      const OptimizerStep& step) override {
    stream.synchronize();  // earlier copies into the chunks have landed
    cuda::optimizer_step_on_host(optimizer, chunks, step);
  }
};

TEST(OptimizerCudaEmulation, DeviceStepArithmeticMatchesTheCpuKernels) {
  EmulatedCudaOptimizerContext context;
  // Without the 65541-element case: host loops element by element (the GPU test has it).
  testing::check_device_optimizers(context, {{1, 1}, {22, 7}, {1023, 4099}});
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
    cuda::optimizer_step_on_host(*optimizer, chunks, OptimizerStep{});
    FAIL() << "expected zero::Error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("neither"), std::string::npos) << error.what();
  }
  chunks[0].grads = grads.data();
  chunks[0].segments = {{2, 3, 0}};  // [2, 5) past the chunk's 4 elements
  EXPECT_THROW(cuda::optimizer_step_on_host(*optimizer, chunks, OptimizerStep{}), Error);
  chunks[0].segments.clear();
  chunks[0].state = nullptr;
  EXPECT_THROW(cuda::optimizer_step_on_host(*optimizer, chunks, OptimizerStep{}), Error);
}

}  // namespace
}  // namespace zero
