// GPT-2 CUDA kernels (model/gpt2/src/cuda/) against their CPU kernels (layers_cpu.h) on random
// inputs with odd sizes, dropout on and off (skips without a device). Tolerances: fp32 results
// 1e-5 relative (with a floor where a result is a difference of nearly equal terms, named per
// test); 16-bit outputs as llm.c's kernel tests (dev/cuda/common.h: atol + |ref| · the type's
// epsilon).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../common/random_inputs.h"
#include "../common/relative_difference.h"
#include "device_array.h"
#include "layers_cuda.h"
#include "zero/core/device.h"
#include "zero/core/device_context.h"
#include "zero/core/dtype.h"
#include "zero/core/error.h"
#include "zero/core/stream.h"
#include "zero/gpt2/kernels.h"
#include "zero/gpt2/layers_cpu.h"

namespace zero::gpt2 {
namespace {

using testing::random_tokens;
using testing::random_vector;

class Gpt2CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  }
  void TearDown() override {
    if (cuda_device_count() > 0) {
      EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    }
  }
};

using testing::DeviceArray;

// |actual - expected| <= rtol · |expected| + atol, element by element.
void expect_close(const std::vector<float>& actual, const std::vector<float>& expected, double rtol,
                  double atol, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (std::size_t i = 0; i < actual.size(); ++i)
    ASSERT_LE(std::fabs(double{actual[i]} - expected[i]), rtol * std::fabs(expected[i]) + atol)
        << what << " element " << i << ": " << actual[i] << " vs " << expected[i];
}

// ‖actual - expected‖₂ <= tolerance · ‖expected‖₂ (the GPU issue's criterion for fp32 kernels).
void expect_relative_l2(const std::vector<float>& actual, const std::vector<float>& expected,
                        double tolerance, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  const double error = zero::testing::relative_difference(actual, expected);
  EXPECT_LE(error, tolerance) << what << ": relative L2 error " << error;
}

DropoutSite make_dropout(float probability) {
  DropoutSite dropout;
  dropout.probability = probability;
  dropout.key = derive_key(42, 7);
  dropout.sample_offset = 5;
  return dropout;
}

constexpr double kFp32 = 1e-5;

// 16-bit copies of fp32 values and their exact widening (what both sides compute on).
std::vector<std::uint16_t> narrow(const std::vector<float>& values, DType dtype) {
  std::vector<std::uint16_t> out(values.size());
  convert(values.data(), DType::kFloat32, out.data(), dtype, values.size());
  return out;
}
std::vector<float> widen(const std::vector<std::uint16_t>& values, DType dtype) {
  std::vector<float> out(values.size());
  convert(values.data(), dtype, out.data(), DType::kFloat32, values.size());
  return out;
}

TEST_F(Gpt2CudaTest, EncoderForwardBackward) {
  const std::int64_t B = 3, T = 7, C = 37, V = 50;
  for (float p : {0.0f, 0.1f}) {
    SCOPED_TRACE("dropout " + std::to_string(p));
    const DropoutSite dropout = make_dropout(p);
    const auto tokens = random_tokens(B * T, 9, 1);  // few distinct tokens: rows share buckets
    const auto wte = random_vector(V * C, 2), wpe = random_vector(T * C, 3);
    std::vector<float> out(B * T * C);
    cpu::encoder_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C, dropout);
    DeviceArray<int> d_tokens(tokens);
    DeviceArray<float> d_wte(wte), d_wpe(wpe), d_out(B * T * C);
    cuda::encoder_forward(d_out.get(), d_tokens.get(), d_wte.get(), d_wpe.get(), B, T, C, dropout,
                          nullptr);
    expect_close(d_out.host(), out, kFp32, 0.0, "encoder out");

    const auto dout = random_vector(B * T * C, 4);
    auto dwte = random_vector(V * C, 5), dwpe = random_vector(T * C, 6);  // accumulated into
    DeviceArray<float> d_dout(dout), d_dwte(dwte), d_dwpe(dwpe);
    cpu::encoder_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), B, T, C, dropout);
    cuda::encoder_backward(d_dwte.get(), d_dwpe.get(), d_dout.get(), tokens.data(), B, T, C,
                           dropout, nullptr);
    // Summed in the CPU's row order: equal up to the CPU compiler's FMA contraction.
    expect_close(d_dwte.host(), dwte, kFp32, 1e-7, "dwte");
    expect_close(d_dwpe.host(), dwpe, kFp32, 1e-7, "dwpe");
  }
}

TEST_F(Gpt2CudaTest, ResidualLayerNormForwardBackward) {
  const std::int64_t B = 2, T = 9, C = 45, N = B * T;  // C not a multiple of the warp
  for (float p : {0.0f, 0.2f}) {
    SCOPED_TRACE("dropout " + std::to_string(p));
    const DropoutSite dropout = make_dropout(p);
    const auto residual = random_vector(N * C, 1), inp = random_vector(N * C, 2),
               weight = random_vector(C, 3), bias = random_vector(C, 4);
    std::vector<float> sum(N * C), out(N * C), mean(N), rstd(N);
    cpu::residual_dropout_forward(sum.data(), residual.data(), inp.data(), B, T, C, dropout);
    cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), sum.data(), weight.data(),
                           bias.data(), N, C, 1e-5f);
    DeviceArray<float> d_residual(residual), d_inp(inp), d_weight(weight), d_bias(bias);
    DeviceArray<float> d_sum(N * C), d_out(N * C), d_mean(N), d_rstd(N);
    cuda::residual_layernorm_forward(d_sum.get(), d_out.get(), DType::kFloat32, d_mean.get(),
                                     d_rstd.get(), d_residual.get(), d_inp.get(), d_weight.get(),
                                     d_bias.get(), B, T, C, 1e-5f, dropout, nullptr);
    expect_close(d_sum.host(), sum, kFp32, 0.0, "residual sum");
    // (x - mean) loses relative precision where x ≈ mean: a floor of 1e-5 · |weight| scale.
    expect_close(d_out.host(), out, kFp32, 1e-5, "layernorm out");
    expect_close(d_mean.host(), mean, kFp32, 1e-6, "mean");
    expect_close(d_rstd.host(), rstd, kFp32, 0.0, "rstd");

    // Plain layer norm on the same rows.
    DeviceArray<float> d_out2(N * C), d_mean2(N), d_rstd2(N);
    cuda::layernorm_forward(d_out2.get(), DType::kFloat32, d_mean2.get(), d_rstd2.get(),
                            d_sum.get(), d_weight.get(), d_bias.get(), N, C, 1e-5f, nullptr);
    expect_close(d_out2.host(), out, kFp32, 1e-5, "plain layernorm out");

    // bf16 outputs (the GEMMs' operand, gemm_input_dtype): the device's fp32 values rounded once,
    // within half a bf16 unit in the last place (2^-8 relative).
    DeviceArray<float> d_sum16(N * C), d_mean16(N), d_rstd16(N);
    DeviceArray<std::uint16_t> d_out16(N * C), d_plain16(N * C);
    cuda::residual_layernorm_forward(d_sum16.get(), d_out16.get(), DType::kBFloat16, d_mean16.get(),
                                     d_rstd16.get(), d_residual.get(), d_inp.get(), d_weight.get(),
                                     d_bias.get(), B, T, C, 1e-5f, dropout, nullptr);
    cuda::layernorm_forward(d_plain16.get(), DType::kBFloat16, d_mean16.get(), d_rstd16.get(),
                            d_sum.get(), d_weight.get(), d_bias.get(), N, C, 1e-5f, nullptr);
    const std::vector<float> device_out = d_out.host();
    expect_close(widen(d_out16.host(), DType::kBFloat16), device_out, 0.00390625, 1e-7,
                 "bf16 residual layernorm out");
    expect_close(widen(d_plain16.host(), DType::kBFloat16), d_out2.host(), 0.00390625, 1e-7,
                 "bf16 layernorm out");
    expect_close(d_sum16.host(), d_sum.host(), kFp32, 0.0, "residual sum beside a bf16 out");

    const auto dout = random_vector(N * C, 5);
    auto dinp = random_vector(N * C, 6), dweight = random_vector(C, 7), dbias = random_vector(C, 8);
    DeviceArray<float> d_dout(dout), d_dinp(dinp), d_dweight(dweight), d_dbias(dbias);
    cpu::layernorm_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(), sum.data(),
                            weight.data(), mean.data(), rstd.data(), N, C);
    // The CPU's mean and rstd, so only the backward's arithmetic is compared.
    DeviceArray<float> d_cpu_mean(mean), d_cpu_rstd(rstd);
    cuda::layernorm_backward(d_dinp.get(), d_dweight.get(), d_dbias.get(), d_dout.get(),
                             d_sum.get(), d_weight.get(), d_cpu_mean.get(), d_cpu_rstd.get(), N, C,
                             nullptr);
    expect_close(d_dinp.host(), dinp, kFp32, 1e-5, "dinp");
    expect_close(d_dweight.host(), dweight, kFp32, 1e-5, "dweight");
    expect_close(d_dbias.host(), dbias, kFp32, 1e-5, "dbias");
  }
}

TEST_F(Gpt2CudaTest, GeluForwardBackward) {
  const std::int64_t n = 4099;
  const auto inp = random_vector(n, 1, 3.0), dout = random_vector(n, 2);
  std::vector<float> out(n), dinp(n);
  cpu::gelu_forward(out.data(), inp.data(), n);
  cpu::gelu_backward(dinp.data(), inp.data(), dout.data(), n);
  DeviceArray<float> d_inp(inp), d_dout(dout), d_out(n), d_dinp(n);
  cuda::gelu_forward(d_out.get(), DType::kFloat32, d_inp.get(), n, nullptr);
  cuda::gelu_backward(d_dinp.get(), d_inp.get(), d_dout.get(), n, nullptr);
  // The CPU's tanh is Eigen's rational approximation, the GPU's tanhf: 1 + tanh(z) for z ≪ 0
  // cancels (and the backward's 0.5(1 + t) + 0.5x(1 - t²)·... cancels again), and Eigen's tanh
  // reaches ±1 sooner than tanhf in the tails: on an H100, 1.28e-6 at dinp 5.8e-4 and -9.0e-6
  // where the CPU gives exactly 0 (1 - t² = 0). The tensor is held to the 1e-5 in relative
  // L2 norm, each element to an absolute 2e-5.
  expect_close(d_out.host(), out, kFp32, 1e-6, "gelu out");
  expect_relative_l2(d_out.host(), out, 1e-5, "gelu out");
  expect_close(d_dinp.host(), dinp, kFp32, 2e-5, "gelu dinp");
  expect_relative_l2(d_dinp.host(), dinp, 1e-5, "gelu dinp");
  // In place (dinp aliasing dout).
  DeviceArray<float> d_inplace(dout);
  cuda::gelu_backward(d_inplace.get(), d_inp.get(), d_inplace.get(), n, nullptr);
  expect_close(d_inplace.host(), dinp, kFp32, 2e-5, "gelu dinp in place");
  expect_relative_l2(d_inplace.host(), dinp, 1e-5, "gelu dinp in place");
  // A bf16 out (the next GEMM's operand, gemm_input_dtype): the fp32 out rounded once.
  DeviceArray<std::uint16_t> d_out16(n);
  cuda::gelu_forward(d_out16.get(), DType::kBFloat16, d_inp.get(), n, nullptr);
  expect_close(widen(d_out16.host(), DType::kBFloat16), d_out.host(), 0.00390625, 1e-7,
               "bf16 gelu out");
}

TEST_F(Gpt2CudaTest, FusedSoftmaxCrossEntropy) {
  const std::int64_t N = 13, V = 1001, Vp = 1024;
  const auto logits = random_vector(N * Vp, 1, 4.0);
  auto targets = random_tokens(N, static_cast<int>(V), 2);
  targets[3] = -100;  // ignore_index
  targets[7] = static_cast<int>(V - 1);
  std::vector<float> losses(N), logsumexp(N);
  const std::int64_t counted = cpu::crossentropy_forward(losses.data(), logsumexp.data(),
                                                         logits.data(), targets.data(), N, V, Vp);
  EXPECT_EQ(counted, N - 1);
  DeviceArray<float> d_logits(logits), d_losses(N), d_lse(N);
  DeviceArray<int> d_targets(targets);
  cuda::crossentropy_forward(d_losses.get(), d_lse.get(), d_logits.get(), d_targets.get(), N, V, Vp,
                             nullptr);
  // A loss is logsumexp minus a logit: its error is logsumexp's (≈ 20 here) in absolute terms.
  expect_close(d_losses.host(), losses, kFp32, kFp32 * 20, "losses");
  expect_close(d_lse.host(), logsumexp, kFp32, 0.0, "logsumexp");

  std::vector<float> dlogits = logits;
  const float scale = 1.0f / static_cast<float>(counted);
  cpu::crossentropy_backward(dlogits.data(), logsumexp.data(), targets.data(), N, V, Vp, scale);
  cuda::crossentropy_backward(d_logits.get(), d_lse.get(), d_targets.get(), N, V, Vp, scale,
                              nullptr);
  // Probabilities far below the largest are tiny absolute values: a floor of 1e-5 · scale.
  expect_close(d_logits.host(), dlogits, kFp32, 1e-5 * scale, "dlogits");
}

// --label_smoothing_factor 0.1 through the model's kernel seam (make_kernels on the CUDA context),
// against cpu::crossentropy_forward/backward with the same ε; ignored rows (-100 and a target past
// V) get loss 0 and gradient 0, padded columns gradient 0.
TEST_F(Gpt2CudaTest, FusedSoftmaxCrossEntropyWithLabelSmoothing) {
  const std::int64_t N = 13, V = 1001, Vp = 1024;
  const float smoothing = 0.1f;
  auto context = make_cuda_context(0);
  auto kernels = make_kernels(*context);
  ASSERT_TRUE(kernels->supports_label_smoothing());
  Stream& stream = context->compute_stream();
  const auto logits = random_vector(N * Vp, 1, 4.0);
  auto targets = random_tokens(N, static_cast<int>(V), 2);
  targets[3] = -100;                 // ignore_index
  targets[5] = static_cast<int>(V);  // past the vocabulary
  targets[7] = static_cast<int>(V - 1);
  std::vector<float> losses(N), logsumexp(N);
  const std::int64_t counted = cpu::crossentropy_forward(
      losses.data(), logsumexp.data(), logits.data(), targets.data(), N, V, Vp, smoothing);
  EXPECT_EQ(counted, N - 2);
  DeviceArray<float> d_logits(logits), d_losses(N), d_lse(N);
  DeviceArray<int> d_targets(targets);
  kernels->smoothed_crossentropy_forward(stream, d_losses.get(), d_lse.get(), d_logits.get(),
                                         d_targets.get(), N, V, Vp, smoothing);
  // As FusedSoftmaxCrossEntropy: the loss's error is logsumexp's (≈ 20 here) in absolute terms.
  const auto d_losses_host = d_losses.host();
  expect_close(d_losses_host, losses, kFp32, kFp32 * 20, "smoothed losses");
  EXPECT_EQ(d_losses_host[3], 0.0f);
  EXPECT_EQ(d_losses_host[5], 0.0f);
  expect_close(d_lse.host(), logsumexp, kFp32, 0.0, "logsumexp");

  std::vector<float> dlogits = logits;
  const float scale = 1.0f / static_cast<float>(counted);
  cpu::crossentropy_backward(dlogits.data(), logsumexp.data(), targets.data(), N, V, Vp, scale,
                             smoothing);
  kernels->smoothed_crossentropy_backward(stream, d_logits.get(), d_lse.get(), d_targets.get(), N,
                                          V, Vp, scale, smoothing);
  const auto d_dlogits = d_logits.host();
  expect_close(d_dlogits, dlogits, kFp32, 1e-5 * scale, "smoothed dlogits");
  for (std::int64_t c = 0; c < Vp; ++c) {
    ASSERT_EQ(d_dlogits[3 * Vp + c], 0.0f) << "ignored row, column " << c;
    ASSERT_EQ(d_dlogits[5 * Vp + c], 0.0f) << "row past V, column " << c;
  }
  for (std::int64_t c = V; c < Vp; ++c) ASSERT_EQ(d_dlogits[c], 0.0f) << "padded column " << c;
}

TEST_F(Gpt2CudaTest, PlainAttentionForwardBackward) {
  const std::int64_t B = 2, T = 37, C = 36, NH = 3;  // T past one warp, HS = 12
  for (float p : {0.0f, 0.1f}) {
    SCOPED_TRACE("dropout " + std::to_string(p));
    const DropoutSite dropout = make_dropout(p);
    const auto qkv = random_vector(B * T * 3 * C, 1), dout = random_vector(B * T * C, 2);
    std::vector<float> out(B * T * C), att(B * NH * T * T), dqkv(B * T * 3 * C),
        datt(B * NH * T * T);
    cpu::attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH, dropout);
    cpu::attention_backward(dqkv.data(), datt.data(), dout.data(), qkv.data(), att.data(), B, T, C,
                            NH, dropout);
    DeviceArray<float> d_qkv(qkv), d_dout(dout), d_out(out.size()), d_att(att.size()),
        d_dqkv(random_vector(dqkv.size(), 3)), d_datt(datt.size());  // dqkv overwritten
    cuda::attention_plain_forward(d_out.get(), d_att.get(), d_qkv.get(), B, T, C, NH, dropout,
                                  nullptr);
    expect_close(d_att.host(), att, kFp32, 1e-7, "att");
    expect_close(d_out.host(), out, kFp32, 1e-6, "attention out");
    cuda::attention_plain_backward(d_dqkv.get(), d_datt.get(), d_dout.get(), d_qkv.get(),
                                   d_att.get(), B, T, C, NH, dropout, nullptr);
    expect_close(d_dqkv.host(), dqkv, kFp32, 1e-6, "dqkv");
  }
}

// The tiled kernels (attention_flash.cu) against the CPU oracle: out and dqkv within 1e-5 in
// relative L2 (the criterion) and elementwise with a floor, att's first B·NH·T floats the
// rows' log-sum-exp, the backward bit for bit the same when repeated (no atomics).
TEST_F(Gpt2CudaTest, TiledAttentionForwardBackward) {
  struct Case {
    std::int64_t B, T, C, NH;
  };
  // HS 12, 64 (T not a multiple of the tile of 64) and 128 (three tiles, the last of 2 rows).
  // Small: gpu_check.sh runs this program under compute-sanitizer's racecheck, which instruments
  // every shared-memory access (GPT-2's T = 1024 is timed by gpt2_cuda_bench instead).
  for (const Case& k : {Case{2, 37, 36, 3}, Case{2, 100, 128, 2}, Case{1, 130, 256, 2}}) {
    for (float p : {0.0f, 0.1f}) {
      SCOPED_TRACE(::testing::Message() << "B " << k.B << " T " << k.T << " C " << k.C << " NH "
                                        << k.NH << " dropout " << p);
      const std::int64_t B = k.B, T = k.T, C = k.C, NH = k.NH, rows = B * NH * T;
      ASSERT_TRUE(cuda::attention_is_tiled(C / NH));
      const DropoutSite dropout = make_dropout(p);
      const auto qkv = random_vector(B * T * 3 * C, 1), dout = random_vector(B * T * C, 2);
      std::vector<float> out(B * T * C), att(B * NH * T * T), dqkv(B * T * 3 * C),
          datt(B * NH * T * T);
      cpu::attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH, dropout);
      cpu::attention_backward(dqkv.data(), datt.data(), dout.data(), qkv.data(), att.data(), B, T,
                              C, NH, dropout);
      DeviceArray<float> d_qkv(qkv), d_dout(dout), d_out(random_vector(out.size(), 4)),
          d_att(att.size()), d_dqkv(random_vector(dqkv.size(), 3)), d_datt(datt.size());
      cuda::attention_forward(d_out.get(), d_att.get(), d_qkv.get(), B, T, C, NH, dropout, nullptr);
      const std::vector<float> got_out = d_out.host();
      expect_relative_l2(got_out, out, 1e-5, "attention out");
      expect_close(got_out, out, 1e-4, 1e-5, "attention out");
      // log Σ exp(scores): the probabilities' normaliser, so P = exp(s - lse) sums to 1 per row.
      const std::vector<float> got_att = d_att.host();
      for (std::int64_t row = 0; row < rows; ++row) {
        const std::int64_t t = row % T;
        double sum = 0.0;
        const std::int64_t b = row / (NH * T), h = (row / T) % NH, HS = C / NH;
        for (std::int64_t t2 = 0; t2 <= t; ++t2) {
          double dot = 0.0;
          for (std::int64_t i = 0; i < HS; ++i)
            dot += double(qkv[(b * T + t) * 3 * C + h * HS + i]) *
                   qkv[(b * T + t2) * 3 * C + C + h * HS + i];
          sum += std::exp(dot / std::sqrt(double(HS)) - got_att[row]);
        }
        ASSERT_NEAR(sum, 1.0, 1e-5) << "row " << row;
      }
      cuda::attention_backward(d_dqkv.get(), d_datt.get(), d_dout.get(), d_out.get(), d_qkv.get(),
                               d_att.get(), B, T, C, NH, dropout, nullptr);
      const std::vector<float> got_dqkv = d_dqkv.host();
      expect_relative_l2(got_dqkv, dqkv, 1e-5, "dqkv");
      expect_close(got_dqkv, dqkv, 1e-3, 1e-4, "dqkv");
      cuda::attention_backward(d_dqkv.get(), d_datt.get(), d_dout.get(), d_out.get(), d_qkv.get(),
                               d_att.get(), B, T, C, NH, dropout, nullptr);
      EXPECT_TRUE(d_dqkv.host() == got_dqkv) << "the backward is not deterministic";
    }
  }
}

// Heads past 128 channels take the plain kernels (att holds the probabilities).
TEST_F(Gpt2CudaTest, WideHeadsFallBackToThePlainAttention) {
  const std::int64_t B = 1, T = 5, C = 260, NH = 2;  // HS = 130
  ASSERT_FALSE(cuda::attention_is_tiled(C / NH));
  const auto qkv = random_vector(B * T * 3 * C, 1);
  std::vector<float> out(B * T * C), att(B * NH * T * T);
  cpu::attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH, DropoutSite{});
  DeviceArray<float> d_qkv(qkv), d_out(out.size()), d_att(att.size());
  cuda::attention_forward(d_out.get(), d_att.get(), d_qkv.get(), B, T, C, NH, DropoutSite{},
                          nullptr);
  expect_close(d_att.host(), att, kFp32, 1e-7, "att");
  expect_close(d_out.host(), out, kFp32, 1e-6, "attention out");
}

// y = 0.5·x·(1 + tanh(√(2/π)(x + 0.044715x³))) on the host, for the GELU epilogue.
std::vector<float> gelu_of(const std::vector<float>& x) {
  std::vector<float> y(x.size());
  cpu::gelu_forward(y.data(), x.data(), static_cast<std::int64_t>(x.size()));
  return y;
}

TEST_F(Gpt2CudaTest, CublasLtGemmFp32AllTransposes) {
  const std::int64_t M = 33, N = 47, K = 29;
  for (bool trans_a : {false, true}) {
    for (bool trans_b : {false, true}) {
      SCOPED_TRACE(std::string("trans_a ") + (trans_a ? "T" : "N") + " trans_b " +
                   (trans_b ? "T" : "N"));
      const std::int64_t lda = trans_a ? M : K, ldb = trans_b ? K : N, ldc = N;
      const auto A = random_vector(M * K, 1), B = random_vector(K * N, 2);
      for (float beta : {0.0f, 1.0f}) {
        auto C = random_vector(M * N, 3);
        DeviceArray<float> d_A(A), d_B(B), d_C(C);
        cpu::gemm(trans_a, trans_b, M, N, K, 1.0f, A.data(), lda, B.data(), ldb, beta, C.data(),
                  ldc);
        cuda::gemm(trans_a, trans_b, M, N, K, d_A.get(), lda, d_B.get(), ldb, DType::kFloat32, beta,
                   d_C.get(), ldc, DType::kFloat32, {}, nullptr);
        // Sums of K products of unit normals: a floor for cancellation.
        expect_close(d_C.host(), C, kFp32, 1e-5 * std::sqrt(double(K)), "C");
      }
    }
  }
}

TEST_F(Gpt2CudaTest, CublasLtGemm16BitOperands) {
  const std::int64_t M = 37, N = 40, K = 53;
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    SCOPED_TRACE(std::string(name_of(dtype)));
    const auto A16 = narrow(random_vector(M * K, 1), dtype),
               B16 = narrow(random_vector(K * N, 2), dtype);
    const auto A = widen(A16, dtype), B = widen(B16, dtype);
    std::vector<float> expected(M * N);
    // Products of 16-bit values are exact in fp32: only the summation order differs.
    cpu::gemm(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, expected.data(), N);
    DeviceArray<std::uint16_t> d_A(A16), d_B(B16);
    DeviceArray<float> d_C32(M * N);
    cuda::gemm(false, true, M, N, K, d_A.get(), K, d_B.get(), K, dtype, 0.0f, d_C32.get(), N,
               DType::kFloat32, {}, nullptr);
    expect_close(d_C32.host(), expected, kFp32, 1e-5 * std::sqrt(double(K)), "fp32 C");
    // 16-bit C: llm.c's tolerance (1e-2 + |ref| · epsilon of the type).
    DeviceArray<std::uint16_t> d_C16(M * N);
    cuda::gemm(false, true, M, N, K, d_A.get(), K, d_B.get(), K, dtype, 0.0f, d_C16.get(), N, dtype,
               {}, nullptr);
    const double epsilon = dtype == DType::kBFloat16 ? 0.0078125 : 0.0009765625;
    expect_close(widen(d_C16.host(), dtype), expected, epsilon, 1e-2, "16-bit C");
  }
}

TEST_F(Gpt2CudaTest, CublasLtBiasAndGeluEpilogues) {
  const std::int64_t M = 21, N = 48, K = 35;  // N a multiple of 8: the GELU aux matrix's ld
  const auto A = random_vector(M * K, 1, 0.5), B = random_vector(K * N, 2, 0.5),
             bias = random_vector(N, 3);
  std::vector<float> pre(M * N);
  cpu::matmul_forward(pre.data(), A.data(), B.data(), bias.data(), M, K, N);
  DeviceArray<float> d_A(A), d_B(B), d_bias(bias), d_out(M * N), d_pre(M * N);
  cuda::GemmEpilogue epilogue;
  epilogue.bias = d_bias.get();
  cuda::gemm(false, false, M, N, K, d_A.get(), K, d_B.get(), N, DType::kFloat32, 0.0f, d_out.get(),
             N, DType::kFloat32, epilogue, nullptr);
  expect_close(d_out.host(), pre, kFp32, 1e-5 * std::sqrt(double(K)), "bias epilogue");
  epilogue.gelu = true;
  epilogue.pre_gelu = d_pre.get();
  cuda::gemm(false, false, M, N, K, d_A.get(), K, d_B.get(), N, DType::kFloat32, 0.0f, d_out.get(),
             N, DType::kFloat32, epilogue, nullptr);
  expect_close(d_pre.host(), pre, kFp32, 1e-5 * std::sqrt(double(K)), "pre-GELU aux");
  // cuBLASLt's GELU is the tanh form; its internal tanh is not the CPU's: 1e-4 absolute.
  expect_close(d_out.host(), gelu_of(pre), 1e-4, 1e-4, "GELU epilogue");
  EXPECT_THROW(cuda::gemm(false, false, M, N, K, d_A.get(), K, d_B.get(), N, DType::kFloat32, 1.0f,
                          d_out.get(), N, DType::kFloat32, epilogue, nullptr),
               Error);
}

// fc's 16-bit backward pass (gelu_bias_backward_staged): GELU's backward, the staging and dbias in
// one pass, bit for bit what the passes it replaced give (gelu_backward, then bias_backward_staged
// over its fp32 output), bf16 and fp16, at an odd shape (past a 256-row chunk, OC not a multiple
// of 32); dout and the pre-activation left as they were; that g against the CPU's; an fp32
// staging refused.
TEST_F(Gpt2CudaTest, GeluStagedBiasPassMatchesTheUnfusedPasses) {
  const std::int64_t N = 300, OC = 97;
  const auto dout = random_vector(N * OC, 1), pre = random_vector(N * OC, 2, 3.0),
             bias = random_vector(OC, 3);
  DeviceArray<float> d_dout(dout), d_pre(pre), d_g(N * OC);
  cuda::gelu_backward(d_g.get(), d_pre.get(), d_dout.get(), N * OC, nullptr);
  std::vector<float> g(N * OC);
  auto dbias = bias;
  cpu::gelu_backward(g.data(), pre.data(), dout.data(), N * OC);
  cpu::bias_backward(dbias.data(), g.data(), N, OC);
  // GeluForwardBackward's tolerances (Eigen's tanh against tanhf).
  expect_close(d_g.host(), g, kFp32, 2e-5, "g");
  expect_relative_l2(d_g.host(), g, 1e-5, "g");
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    SCOPED_TRACE(std::string(name_of(dtype)));
    DeviceArray<float> d_dbias(bias), d_unfused_dbias(bias);
    DeviceArray<std::uint16_t> d_staged(N * OC), d_unfused_staged(N * OC);
    cuda::gelu_bias_backward_staged(d_dbias.get(), d_staged.get(), dtype, d_dout.get(), d_pre.get(),
                                    N, OC, nullptr);
    cuda::bias_backward_staged(d_unfused_dbias.get(), d_unfused_staged.get(), dtype, d_g.get(), N,
                               OC, nullptr);
    EXPECT_EQ(d_dbias.host(), d_unfused_dbias.host());
    EXPECT_EQ(d_staged.host(), d_unfused_staged.host());
    expect_close(d_dbias.host(), dbias, kFp32, 2e-5 * std::sqrt(double(N)), "dbias");
  }
  EXPECT_EQ(d_dout.host(), dout);
  EXPECT_EQ(d_pre.host(), pre);
  EXPECT_THROW(cuda::gelu_bias_backward_staged(d_g.get(), d_dout.get(), DType::kFloat32,
                                               d_dout.get(), d_pre.get(), N, OC, nullptr),
               Error);
}

// The 16-bit linear backward's one pass over dout: dbias as bias_backward's bit for bit, and dout
// rounded to bf16 or fp16 (nearest even); and the LM head's cross-entropy gradient written straight
// into a 16-bit copy: the fp32 gradient rounded once, logits left as they were.
TEST_F(Gpt2CudaTest, SixteenBitStagingPassesMatchTheFp32Kernels) {
  const std::int64_t N = 300, OC = 97;  // past a 256-row chunk; OC not a multiple of 32
  const auto dout = random_vector(N * OC, 1), bias = random_vector(OC, 2);
  DeviceArray<float> d_dout(dout), d_dbias(bias);
  cuda::bias_backward(d_dbias.get(), d_dout.get(), N, OC, nullptr);
  const auto dbias = d_dbias.host();
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    SCOPED_TRACE(std::string(name_of(dtype)));
    DeviceArray<float> d_staged_dbias(bias);
    DeviceArray<std::uint16_t> d_staged(N * OC);
    cuda::bias_backward_staged(d_staged_dbias.get(), d_staged.get(), dtype, d_dout.get(), N, OC,
                               nullptr);
    EXPECT_EQ(d_staged_dbias.host(), dbias);
    EXPECT_EQ(d_staged.host(), narrow(dout, dtype));
  }
  EXPECT_THROW(cuda::bias_backward_staged(d_dbias.get(), d_dout.get(), DType::kFloat32,
                                          d_dout.get(), N, OC, nullptr),
               Error);

  const std::int64_t R = 13, V = 1001, Vp = 1024;
  const auto logits = random_vector(R * Vp, 3, 4.0);
  auto targets = random_tokens(R, static_cast<int>(V), 4);
  targets[3] = -100;
  DeviceArray<float> d_logits(logits), d_losses(R), d_lse(R), d_inplace(logits);
  DeviceArray<int> d_targets(targets);
  cuda::crossentropy_forward(d_losses.get(), d_lse.get(), d_logits.get(), d_targets.get(), R, V, Vp,
                             nullptr, 0.1f);
  cuda::crossentropy_backward(d_inplace.get(), d_lse.get(), d_targets.get(), R, V, Vp, 0.25f,
                              nullptr, 0.1f);
  DeviceArray<std::uint16_t> d_dlogits16(R * Vp);
  cuda::crossentropy_backward(d_dlogits16.get(), DType::kBFloat16, d_logits.get(), DType::kFloat32,
                              d_lse.get(), d_targets.get(), R, V, Vp, 0.25f, nullptr, 0.1f);
  EXPECT_EQ(d_dlogits16.host(), narrow(d_inplace.host(), DType::kBFloat16));
  EXPECT_EQ(d_logits.host(), logits);

  // bf16 logits (logits_dtype on CUDA with bf16 parameters): the fp32 kernels' results over the
  // widened values, bit for bit (each value is widened exactly before the same fp32 math).
  const auto logits16 = narrow(logits, DType::kBFloat16);
  DeviceArray<std::uint16_t> d_logits16(logits16);
  DeviceArray<float> d_widened(widen(logits16, DType::kBFloat16)), d_losses_w(R), d_lse_w(R),
      d_losses16(R), d_lse16(R);
  cuda::crossentropy_forward(d_losses_w.get(), d_lse_w.get(), d_widened.get(), d_targets.get(), R,
                             V, Vp, nullptr, 0.1f);
  cuda::crossentropy_forward(d_losses16.get(), d_lse16.get(), d_logits16.get(), DType::kBFloat16,
                             d_targets.get(), R, V, Vp, nullptr, 0.1f);
  EXPECT_EQ(d_losses16.host(), d_losses_w.host());
  EXPECT_EQ(d_lse16.host(), d_lse_w.host());
  DeviceArray<std::uint16_t> d_from16(R * Vp);
  cuda::crossentropy_backward(d_from16.get(), DType::kBFloat16, d_logits16.get(), DType::kBFloat16,
                              d_lse_w.get(), d_targets.get(), R, V, Vp, 0.25f, nullptr, 0.1f);
  cuda::crossentropy_backward(d_widened.get(), d_lse_w.get(), d_targets.get(), R, V, Vp, 0.25f,
                              nullptr, 0.1f);
  EXPECT_EQ(d_from16.host(), narrow(d_widened.host(), DType::kBFloat16));
  EXPECT_THROW(cuda::crossentropy_backward(d_from16.get(), DType::kFloat16, d_logits16.get(),
                                           DType::kBFloat16, d_lse_w.get(), d_targets.get(), R, V,
                                           Vp, 0.25f, nullptr, 0.1f),
               Error);
}

// A bf16 out (attention_io_dtype's qkv) through the kernel seam: the GEMM writes bf16 with the
// unit's bf16 bias in cuBLASLt's epilogue, the fp32 out's values (fp32 bias: the bf16 one
// widened) rounded once, up to the summation order of another algorithm (one bf16 ulp). Refused:
// a bf16 out without the bf16 bias, or with fp32 weights.
TEST_F(Gpt2CudaTest, LinearForwardWritesA16BitOutWithTheStoredBias) {
  const std::int64_t N = 37, C = 24, OC = 72;
  const DType bf16 = DType::kBFloat16;
  const auto inp16 = narrow(random_vector(N * C, 1), bf16),
             weight16 = narrow(random_vector(C * OC, 2, 0.5), bf16),
             bias16 = narrow(random_vector(OC, 3), bf16);
  DeviceArray<std::uint16_t> d_inp(inp16), d_weight(weight16), d_bias16(bias16), d_out16(N * OC);
  DeviceArray<float> d_bias(widen(bias16, bf16)), d_out(N * OC);
  const std::unique_ptr<DeviceContext> context = make_cuda_context(0);
  const std::unique_ptr<Kernels> kernels = make_kernels(*context);
  Stream& stream = context->compute_stream();
  LinearForward call{d_out.get(), {}, {d_inp.get(), bf16}, {d_weight.get(), bf16}, d_bias.get(), N,
                     C,           OC, d_bias16.get()};
  kernels->linear_forward(stream, call, GemmScratch{});
  call.out = ActivationOut(d_out16.get(), bf16);
  kernels->linear_forward(stream, call, GemmScratch{});
  stream.synchronize();
  expect_close(widen(d_out16.host(), bf16), d_out.host(), 0.0078125, 1e-6, "bf16 out");
  call.stored_bias = nullptr;
  EXPECT_THROW(kernels->linear_forward(stream, call, GemmScratch{}), Error);
  call.stored_bias = d_bias16.get();
  call.weight.dtype = DType::kFloat32;
  EXPECT_THROW(kernels->linear_forward(stream, call, GemmScratch{}), Error);
}

// Layouts and algorithms are cached per problem: a repeated problem adds no plan, a new shape or
// a differently aligned operand does, and alternating problems keep their own results.
TEST_F(Gpt2CudaTest, CublasLtPlansAreCachedPerProblem) {
  const std::int64_t M = 19, N = 24, K = 29;
  const auto A = random_vector(M * K + 1, 1), B = random_vector(K * N, 2);
  std::vector<float> expected(M * N), expected_offset(M * N);
  cpu::gemm(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, expected.data(), N);
  cpu::gemm(false, false, M, N, K, 1.0f, A.data() + 1, K, B.data(), N, 0.0f, expected_offset.data(),
            N);
  DeviceArray<float> d_A(A), d_B(B), d_C(M * N);
  auto run = [&](const float* a) {
    cuda::gemm(false, false, M, N, K, a, K, d_B.get(), N, DType::kFloat32, 0.0f, d_C.get(), N,
               DType::kFloat32, {}, nullptr);
  };
  run(d_A.get());
  const std::size_t plans = cuda::gemm_plans_cached();
  for (int round = 0; round < 3; ++round) {
    run(d_A.get());
    expect_close(d_C.host(), expected, kFp32, 1e-5 * std::sqrt(double(K)), "aligned");
    run(d_A.get() + 1);  // 4-byte aligned A: another plan
    expect_close(d_C.host(), expected_offset, kFp32, 1e-5 * std::sqrt(double(K)), "offset");
  }
  EXPECT_EQ(cuda::gemm_plans_cached(), plans + 1);
}

TEST_F(Gpt2CudaTest, MatmulForwardBackward) {
  const std::int64_t N = 27, C = 31, OC = 3 * 31 + 1;
  const auto inp = random_vector(N * C, 1), weight = random_vector(C * OC, 2),
             bias = random_vector(OC, 3), dout = random_vector(N * OC, 4);
  std::vector<float> out(N * OC), dinp(N * C);
  auto dweight = random_vector(C * OC, 5), dbias = random_vector(OC, 6);
  cpu::matmul_forward(out.data(), inp.data(), weight.data(), bias.data(), N, C, OC);
  DeviceArray<float> d_inp(inp), d_weight(weight), d_bias(bias), d_dout(dout), d_out(N * OC),
      d_dinp(N * C), d_dweight(dweight), d_dbias(dbias);
  cpu::matmul_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(),
                       weight.data(), N, C, OC);
  cuda::matmul_forward(d_out.get(), d_inp.get(), d_weight.get(), d_bias.get(), N, C, OC, nullptr);
  cuda::matmul_backward(d_dinp.get(), d_dweight.get(), d_dbias.get(), d_dout.get(), d_inp.get(),
                        d_weight.get(), N, C, OC, nullptr);
  expect_close(d_out.host(), out, kFp32, 1e-5 * std::sqrt(double(C)), "out");
  expect_close(d_dinp.host(), dinp, kFp32, 1e-5 * std::sqrt(double(OC)), "dinp");
  expect_close(d_dweight.host(), dweight, kFp32, 1e-5 * std::sqrt(double(N)), "dweight");
  expect_close(d_dbias.host(), dbias, kFp32, 1e-5 * std::sqrt(double(N)), "dbias");
}

TEST_F(Gpt2CudaTest, BadShapesAreRefused) {
  DeviceArray<float> d(16);
  EXPECT_THROW(
      cuda::attention_forward(d.get(), d.get(), d.get(), 1, 2, 10, 3, DropoutSite{}, nullptr),
      Error);
  // The tiled kernels' grid holds at most 65535 heads (B · NH); refused before any launch.
  EXPECT_THROW(
      cuda::attention_forward(d.get(), d.get(), d.get(), 65536, 1, 16, 1, DropoutSite{}, nullptr),
      Error);
  EXPECT_THROW(cuda::attention_backward(d.get(), d.get(), d.get(), d.get(), d.get(), d.get(), 65536,
                                        1, 16, 1, DropoutSite{}, nullptr),
               Error);
  // The tiled backward reads each row's D = dout · out from the forward's out: a null one is
  // refused before any launch.
  EXPECT_THROW(cuda::attention_backward(d.get(), d.get(), d.get(), nullptr, d.get(), d.get(), 1, 1,
                                        16, 1, DropoutSite{}, nullptr),
               Error);
  EXPECT_THROW(cuda::crossentropy_forward(d.get(), d.get(), d.get(), nullptr, 1, 17, 16, nullptr),
               Error);
  // Label smoothing outside [0, 1), refused before any launch.
  EXPECT_THROW(
      cuda::crossentropy_forward(d.get(), d.get(), d.get(), nullptr, 1, 16, 16, nullptr, 1.0f),
      Error);
  EXPECT_THROW(
      cuda::crossentropy_backward(d.get(), d.get(), nullptr, 1, 16, 16, 1.0f, nullptr, -0.1f),
      Error);
  EXPECT_THROW(cuda::gemm(false, false, 2, 2, 2, d.get(), 2, d.get(), 2, DType::kBFloat16, 0.0f,
                          d.get(), 2, DType::kFloat16, {}, nullptr),
               Error);
}

}  // namespace
}  // namespace zero::gpt2
