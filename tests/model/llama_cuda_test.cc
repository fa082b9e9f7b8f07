// The Llama family's CUDA kernels (layers.cu's RMSNorm, llama_layers.cu's rotary embedding and
// SwiGLU) through the model's kernel seam on a CUDA context, against the CPU kernels on the same
// inputs (llama_seam_checks.h): each element within 2e-6 · max(1, |expected|), dweight's column
// sums within 2e-5; the rotary table copied bit for bit. Label cuda: skips without a device. The
// bodies themselves run on the CPU in llama_cuda_emulation_test.
#include <gtest/gtest.h>

#include <memory>

#include "llama_seam_checks.h"
#include "zero/core/device.h"

namespace zero::gpt2 {
namespace {

class LlamaCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
    context_ = make_cuda_context(0);
  }
  std::unique_ptr<DeviceContext> context_;
};

constexpr double kBound = 2e-6;

TEST_F(LlamaCuda, RmsNormMatchesTheCpuKernels) { testing::expect_seam_rmsnorm(*context_, kBound); }
TEST_F(LlamaCuda, RopeMatchesTheCpuKernels) { testing::expect_seam_rope(*context_, kBound); }
TEST_F(LlamaCuda, SwigluMatchesTheCpuKernels) { testing::expect_seam_swiglu(*context_, kBound); }

}  // namespace
}  // namespace zero::gpt2
