// The Llama family's CUDA kernels (layers.cu's RMSNorm, llama_layers.cu's rotary embedding and
// SwiGLU) through the model's kernel seam on a CUDA context, against the CPU kernels on the same
// inputs (llama_seam_checks.h): each element within 2e-6 · max(1, |expected|), dweight's column
// sums within 2e-5; the rotary table copied bit for bit; generation's decoder against the CPU's.
// Label cuda: skips without a device. The bodies themselves run on the CPU in
// llama_cuda_emulation_test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "../common/tiny_gpt2.h"
#include "llama_seam_checks.h"
#include "zero/core/allocator.h"
#include "zero/core/cpu_context.h"
#include "zero/core/device.h"
#include "zero/core/memory_ledger.h"
#include "zero/gpt2/decoder.h"
#include "zero/gpt2/model.h"
#include "zero/gpt2/sampling.h"

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

// Generation's decoder on the device (cached_attention.cu, the k/v scatter, the one-row head)
// against the CPU's on the same tiny GPT-2 and Qwen2 (GQA): every step's logits within 1e-5 of
// their scale.
TEST_F(LlamaCuda, DecoderStepsMatchTheCpuDecoder) {
  MemoryLedger ledger;
  HostAllocator allocator(ledger);
  const std::unique_ptr<DeviceContext> cpu = make_cpu_context();
  for (const bool llama : {false, true}) {
    SCOPED_TRACE(llama ? "qwen2" : "gpt2");
    GPT2Model model(llama ? tiny_llama_config() : tiny_config(), allocator);
    model.init(41);
    Decoder on_device(model, *context_, 12), on_host(model, *cpu, 12);
    std::vector<int> tokens = {3, 1, 4, 1, 5};
    std::vector<float> expected = on_host.append(tokens), actual = on_device.append(tokens);
    for (int step = 0; step < 7; ++step) {
      double scale = 0.0, error = 0.0;
      for (std::size_t v = 0; v < expected.size(); ++v) {
        scale = std::max(scale, std::abs(double(expected[v])));
        error = std::max(error, std::abs(double(actual[v]) - expected[v]));
      }
      EXPECT_LE(error, 1e-5 * scale) << "step " << step;
      const int next = sample_greedy(expected);
      expected = on_host.append({&next, 1});
      actual = on_device.append({&next, 1});
    }
  }
}

}  // namespace
}  // namespace zero::gpt2
