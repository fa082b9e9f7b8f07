// optim/'s fused CUDA optimizer kernels (Optimizer::step_on on a CUDA context) against its CPU
// kernels (skips without a device): Adam/AdamW/SGD/Lamb, fp32 and 16-bit gradients, 16-bit
// parameter copies, aligned and unaligned chunks, odd sizes.
#include <gtest/gtest.h>

#include "device_optimizer_checks.h"
#include "zero/core/device.h"
#include "zero/core/error.h"

namespace zero {
namespace {

class OptimizerCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_F(OptimizerCudaTest, FusedStepsMatchTheCpuKernels) {
  auto context = make_cuda_context(0);
  testing::check_device_optimizers(*context);
}

// An optimizer with CPU kernels only (Optimizer::step_on's default) is refused with its name.
class HostOnlyOptimizer final : public Optimizer {
 public:
  std::string_view name() const override { return "HostOnly"; }
  int states_per_element() const override { return 0; }
  std::vector<std::string> state_names() const override { return {}; }
  double lr() const override { return 0.1; }
  double beta1() const override { return 0.0; }
  void step(std::span<ShardChunk>, const OptimizerStep&) override {}
};

TEST_F(OptimizerCudaTest, RefusesAnOptimizerWithCpuKernelsOnly) {
  auto context = make_cuda_context(0);
  HostOnlyOptimizer optimizer;
  std::vector<ShardChunk> chunks;
  try {
    optimizer.step_on(*context, context->compute_stream(), chunks, OptimizerStep{});
    FAIL() << "expected zero::Error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("HostOnly"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace zero
