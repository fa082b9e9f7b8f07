// cuDNN's fused SDPA (model/gpt2/src/cuda/attention_cudnn.h) through the model's kernel seam
// (Kernels::attention_forward/backward with bf16 precision on the CUDA context) against the CPU
// oracle run in fp32 on the same bf16-rounded q, k, v: out and dqkv within 1e-2 and 2e-2 in
// relative L2 (bf16 inputs, P rounded to bf16 before P·V as FlashAttention does), att the rows'
// log-sum-exp. ZERO_ATTENTION=cudnn makes the kernels refuse, not fall back, so a pass means cuDNN
// ran. Label cuda: skips without a device; skips where the build has no cudnn_frontend headers.
#include "attention_cudnn.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "../common/random_inputs.h"
#include "../common/relative_difference.h"
#include "device_array.h"
#include "zero/core/device.h"
#include "zero/core/device_context.h"
#include "zero/core/dtype.h"
#include "zero/core/error.h"
#include "zero/gpt2/kernels.h"
#include "zero/gpt2/layers_cpu.h"

namespace zero::gpt2 {
namespace {

class CudnnAttentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
    if (!cuda::cudnn_attention_built()) GTEST_SKIP() << "built without cudnn_frontend headers";
    setenv("ZERO_ATTENTION", "cudnn", 1);
    context_ = make_cuda_context(0);
    kernels_ = make_kernels(*context_);
  }
  void TearDown() override { unsetenv("ZERO_ATTENTION"); }
  std::unique_ptr<DeviceContext> context_;
  std::unique_ptr<Kernels> kernels_;
};

using testing::DeviceArray;

std::vector<float> rounded_to_bf16(std::vector<float> values) {
  for (float& value : values) value = to_float(to_bf16(value));
  return values;
}

struct Shape {
  std::int64_t B, T, C, NH;
};

// HS 64 (GPT-2's) at T past one tile and not a multiple of it, HS 128, and GPT-2 124M's own
// attention at T = 1024 for one sequence.
TEST_F(CudnnAttentionTest, MatchesTheCpuOracleAtBf16) {
  for (const Shape& s : {Shape{2, 37, 128, 2}, Shape{1, 200, 192, 3}, Shape{2, 64, 256, 2},
                         Shape{1, 1024, 768, 12}}) {
    const std::int64_t B = s.B, T = s.T, C = s.C, NH = s.NH, HS = C / NH;
    SCOPED_TRACE(::testing::Message() << "B " << B << " T " << T << " C " << C << " NH " << NH);
    const auto qkv = rounded_to_bf16(testing::random_vector(B * T * 3 * C, 1));
    const auto dout = testing::random_vector(B * T * C, 2);
    std::vector<float> out(B * T * C), att(B * NH * T * T), dqkv(B * T * 3 * C),
        datt(B * NH * T * T);
    cpu::attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH, DropoutSite{});
    cpu::attention_backward(dqkv.data(), datt.data(), dout.data(), qkv.data(), att.data(), B, T, C,
                            NH, DropoutSite{});
    const AttentionLayout layout = attention_layout(DeviceKind::kCuda, B, T, C, NH);
    DeviceArray<float> d_qkv(qkv), d_dout(dout), d_out(testing::random_vector(B * T * C, 4)),
        d_att(std::vector<float>(B * T * layout.saved_per_row)),
        d_datt(std::vector<float>(layout.scratch)),
        d_dqkv(testing::random_vector(B * T * 3 * C, 3));  // overwritten
    // The 16-bit staging GPT2Compute hands its calls: 4·N·C bf16 in each buffer.
    DeviceArray<std::uint16_t> staged_a(std::vector<std::uint16_t>(4 * B * T * C)),
        staged_b(std::vector<std::uint16_t>(4 * B * T * C));
    GemmScratch scratch;
    scratch.staged_a = staged_a.get();
    scratch.staged_b = staged_b.get();
    scratch.staged_a_elements = scratch.staged_b_elements = 4 * B * T * C;
    Stream& stream = context_->compute_stream();
    kernels_->attention_forward(stream, d_out.get(), d_att.get(), d_qkv.get(), B, T, C, NH,
                                DropoutSite{}, DType::kBFloat16, scratch);
    const std::vector<float> got_out = d_out.host();
    EXPECT_LE(zero::testing::relative_difference(got_out, out), 1e-2);
    // att: log Σ exp(scaled scores) per (b, h, t) row, so the probabilities sum to 1.
    const std::vector<float> lse = d_att.host();
    for (std::int64_t row = 0; row < B * NH * T; row += 7) {
      const std::int64_t b = row / (NH * T), h = (row / T) % NH, t = row % T;
      double sum = 0.0;
      for (std::int64_t t2 = 0; t2 <= t; ++t2) {
        double dot = 0.0;
        for (std::int64_t i = 0; i < HS; ++i)
          dot += double(qkv[(b * T + t) * 3 * C + h * HS + i]) *
                 qkv[(b * T + t2) * 3 * C + C + h * HS + i];
        sum += std::exp(dot / std::sqrt(double(HS)) - lse[row]);
      }
      ASSERT_NEAR(sum, 1.0, 1e-3) << "row " << row;
    }
    kernels_->attention_backward(stream, d_dqkv.get(), d_datt.get(), d_dout.get(), d_out.get(),
                                 d_qkv.get(), d_att.get(), B, T, C, NH, DropoutSite{},
                                 DType::kBFloat16, scratch);
    EXPECT_LE(zero::testing::relative_difference(d_dqkv.host(), dqkv), 2e-2);
  }
}

// Where cuDNN's attention does not apply, ZERO_ATTENTION=cudnn says why instead of falling back.
TEST_F(CudnnAttentionTest, RefusesWhatItDoesNotRun) {
  const std::int64_t B = 1, T = 16, C = 64, NH = 2;
  DeviceArray<float> qkv(std::vector<float>(B * T * 3 * C)), out(std::vector<float>(B * T * C)),
      att(std::vector<float>(B * T * NH));
  Stream& stream = context_->compute_stream();
  DropoutSite dropout;
  dropout.probability = 0.1f;
  const auto fails = [&](const DropoutSite& site, DType precision, const std::string& what) {
    try {
      kernels_->attention_forward(stream, out.get(), att.get(), qkv.get(), B, T, C, NH, site,
                                  precision, GemmScratch{});
      ADD_FAILURE() << "no error for " << what;
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find(what), std::string::npos) << error.what();
    }
  };
  fails(dropout, DType::kBFloat16, "dropout");
  fails(DropoutSite{}, DType::kFloat32, "fp32");
  fails(DropoutSite{}, DType::kFloat16, "fp16");
  // A head of 12 channels: cuDNN takes multiples of 8.
  DeviceArray<float> odd(std::vector<float>(B * T * 3 * 36));
  try {
    kernels_->attention_forward(stream, out.get(), att.get(), odd.get(), B, T, 36, 3, DropoutSite{},
                                DType::kBFloat16, GemmScratch{});
    ADD_FAILURE() << "no error for a head of 12 channels";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("head size 12"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace zero::gpt2
