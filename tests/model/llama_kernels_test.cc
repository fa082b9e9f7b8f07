// The Llama family's CPU kernels (layers_cpu.h: RMSNorm, rotary embeddings, SwiGLU) against their
// scalar twins (reference_kernels.h) on random inputs at odd sizes, finite-difference gradient
// checks of the twins in double, and the rotary frequencies (rope.h) against their definitions
// computed here in double: default, and llama3 scaling in each of its three bands. The oracle
// independent of zero is llama_kernels_golden_test's (transformers' own modules).
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <vector>

#include "../common/kernel_checks.h"
#include "../common/random_inputs.h"
#include "zero/core/dtype.h"
#include "zero/core/error.h"
#include "zero/gpt2/layers_cpu.h"
#include "zero/gpt2/reference_kernels.h"
#include "zero/gpt2/rope.h"

namespace zero::gpt2 {
namespace {

using testing::random_vector;
using zero::testing::check_gradient;
using zero::testing::dot;
using zero::testing::expect_near_all;

// Rotary parameters without scaling unless given.
RopeParameters rope(std::int64_t head_dim, double theta, RopeScaling scaling = {}) {
  return {head_dim, theta, scaling};
}

struct Shape {
  std::int64_t N, C;
};
class LlamaKernelsAgainstReference : public ::testing::TestWithParam<Shape> {};

TEST_P(LlamaKernelsAgainstReference, RmsNormForwardAndBackward) {
  const auto [N, C] = GetParam();
  const auto inp = random_vector(N * C, 1, 2.0), weight = random_vector(C, 2);
  std::vector<float> out(N * C), rstd(N), ref_out(N * C), ref_rstd(N);
  cpu::rmsnorm_forward(out.data(), rstd.data(), inp.data(), weight.data(), N, C, 1e-6f);
  reference::rmsnorm_forward(ref_out.data(), ref_rstd.data(), inp.data(), weight.data(), N, C,
                             1e-6f);
  expect_near_all(out, ref_out, 1e-5, "rmsnorm out");
  expect_near_all(rstd, ref_rstd, 1e-5, "rmsnorm rstd");
  const auto dout = random_vector(N * C, 3);
  std::vector<float> dinp(N * C, 0.5f), dweight(C, 0.25f);
  auto ref_dinp = dinp, ref_dweight = dweight;
  cpu::rmsnorm_backward(dinp.data(), dweight.data(), dout.data(), inp.data(), weight.data(),
                        rstd.data(), N, C);
  reference::rmsnorm_backward(ref_dinp.data(), ref_dweight.data(), dout.data(), inp.data(),
                              weight.data(), ref_rstd.data(), N, C);
  expect_near_all(dinp, ref_dinp, 1e-4, "rmsnorm dinp (accumulated)");
  expect_near_all(dweight, ref_dweight, 1e-4, "rmsnorm dweight (accumulated)");
}

TEST_P(LlamaKernelsAgainstReference, SwigluForwardAndBackward) {
  const auto [N, H] = GetParam();
  const auto inp = random_vector(N * 2 * H, 4, 3.0), dout = random_vector(N * H, 5);
  std::vector<float> out(N * H), ref_out(N * H);
  cpu::swiglu_forward(out.data(), inp.data(), N, H);
  reference::swiglu_forward(ref_out.data(), inp.data(), N, H);
  expect_near_all(out, ref_out, 1e-6, "swiglu out");
  std::vector<float> dinp(N * 2 * H, 9.0f), ref_dinp(N * 2 * H);
  cpu::swiglu_backward(dinp.data(), dout.data(), inp.data(), N, H);
  reference::swiglu_backward(ref_dinp.data(), dout.data(), inp.data(), N, H);
  expect_near_all(dinp, ref_dinp, 1e-6, "swiglu dinp");
}

// Grouped-query attention's repetition: every group size of 6 heads (1: plain attention, 6: one
// key/value head), fp32 and bf16 (a byte copy), and the backward's sums over each group.
TEST(LlamaKernels, RepeatKvCopiesEachKeyValueHeadToItsGroupAndSumsItBack) {
  const std::int64_t N = 5, NH = 6, HS = 7;
  for (std::int64_t KVH : {1, 2, 3, 6}) {
    SCOPED_TRACE(::testing::Message() << "KVH " << KVH);
    const std::int64_t width = (NH + 2 * KVH) * HS, heads = 3 * NH * HS;
    const auto qkv = random_vector(N * width, 11);
    std::vector<float> out(N * heads, -1.0f), expected(N * heads);
    cpu::repeat_kv_forward(out.data(), qkv.data(), sizeof(float), N, NH, KVH, HS);
    reference::repeat_kv_forward(expected.data(), qkv.data(), N, NH, KVH, HS);
    EXPECT_EQ(out, expected);
    std::vector<BFloat16> qkv16(qkv.size()), out16(out.size());
    for (std::size_t i = 0; i < qkv.size(); ++i) qkv16[i] = to_bf16(qkv[i]);
    cpu::repeat_kv_forward(out16.data(), qkv16.data(), sizeof(BFloat16), N, NH, KVH, HS);
    for (std::size_t i = 0; i < out.size(); ++i)
      ASSERT_EQ(to_float(out16[i]), to_float(to_bf16(expected[i]))) << "bf16 element " << i;

    const auto dheads = random_vector(N * heads, 12);
    std::vector<float> dqkv(N * width, 9.0f), dqkv_expected(N * width);
    cpu::repeat_kv_backward(dqkv.data(), dheads.data(), N, NH, KVH, HS);
    reference::repeat_kv_backward(dqkv_expected.data(), dheads.data(), N, NH, KVH, HS);
    expect_near_all(dqkv, dqkv_expected, 1e-6, "repeat_kv dqkv (overwritten)");
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, LlamaKernelsAgainstReference,
                         ::testing::Values(Shape{1, 1}, Shape{22, 24}, Shape{5, 1023},
                                           Shape{17, 64}));

// q and k heads of a GQA qkv row (NH 3, NKV 1, so 5 heads of 10 channels a row of which 4 rotate),
// generation's position offset, llama3 scaling: the CPU kernel as its twin, v untouched, and the
// backward the forward's inverse.
TEST(LlamaKernels, RopeRotatesQAndKHeadsOfTheRowAtTheirPositions) {
  const RopeParameters parameters =
      rope(10, 500000.0, {RopeScaling::Type::kLlama3, 8.0, 1.0, 4.0, 32.0});
  for (std::int64_t offset : {0, 7}) {
    SCOPED_TRACE(offset);
    const RopeLayout layout{
        .B = 2, .T = 13, .heads = 4, .head_dim = 10, .row_stride = 50, .position_offset = offset};
    const std::vector<float> table = rope_table(parameters, offset + layout.T);
    const auto x = random_vector(layout.B * layout.T * layout.row_stride, 6);
    auto rotated = x, expected = x;
    cpu::rope_forward(rotated.data(), table.data(), layout);
    reference::rope_forward(expected.data(), table.data(), layout);
    expect_near_all(rotated, expected, 1e-6, "rope out");
    for (std::int64_t row = 0; row < layout.B * layout.T; ++row)
      for (std::int64_t c = 40; c < 50; ++c)
        ASSERT_EQ(rotated[row * 50 + c], x[row * 50 + c]) << "v changed, row " << row;
    for (std::int64_t c = 0; offset == 0 && c < 40; ++c)  // position 0: cos 1, sin 0
      ASSERT_EQ(rotated[c], x[c]) << "channel " << c;
    cpu::rope_backward(rotated.data(), table.data(), layout);
    expect_near_all(rotated, x, 1e-6, "rope backward of rope forward");
  }
}

TEST(LlamaFiniteDifferences, RmsNorm) {
  const std::int64_t N = 3, C = 5;
  auto x = random_vector<double>(N * C, 30), w = random_vector<double>(C, 31);
  const auto probe = random_vector<double>(N * C, 33);
  std::vector<double> out(N * C), rstd(N);
  auto loss = [&] {
    reference::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5);
    return dot(out, probe);
  };
  loss();
  std::vector<double> dx(N * C, 0.0), dw(C, 0.0);
  reference::rmsnorm_backward(dx.data(), dw.data(), probe.data(), x.data(), w.data(), rstd.data(),
                              N, C);
  check_gradient(x, dx, loss, "rmsnorm dinp");
  check_gradient(w, dw, loss, "rmsnorm dweight");
}

TEST(LlamaFiniteDifferences, RopeAndSwiglu) {
  const RopeLayout layout{
      .B = 2, .T = 3, .heads = 2, .head_dim = 4, .row_stride = 12, .position_offset = 2};
  const std::vector<float> table = rope_table(rope(4, 100.0), 5);
  auto x = random_vector<double>(layout.B * layout.T * layout.row_stride, 40);
  const auto probe = random_vector<double>(x.size(), 41);
  auto rope_loss = [&] {
    std::vector<double> rotated = x;
    reference::rope_forward(rotated.data(), table.data(), layout);
    return dot(rotated, probe);
  };
  std::vector<double> dx = probe;
  reference::rope_backward(dx.data(), table.data(), layout);
  check_gradient(x, dx, rope_loss, "rope dinp");

  const std::int64_t N = 3, H = 4;
  auto inp = random_vector<double>(N * 2 * H, 42, 2.0);
  const auto dout = random_vector<double>(N * H, 43);
  std::vector<double> out(N * H), dinp(N * 2 * H);
  auto swiglu_loss = [&] {
    reference::swiglu_forward(out.data(), inp.data(), N, H);
    return dot(out, dout);
  };
  reference::swiglu_backward(dinp.data(), dout.data(), inp.data(), N, H);
  check_gradient(inp, dinp, swiglu_loss, "swiglu dinp");
}

// f_i = 1 / theta^(2i / d), in double here: within fp32's rounding of the steps.
TEST(RopeFrequencies, DefaultAreTheInverseThetaPowers) {
  for (std::int64_t d : {2, 10, 64, 128}) {
    const std::vector<float> f = rope_inverse_frequencies(rope(d, 10000.0));
    ASSERT_EQ(static_cast<std::int64_t>(f.size()), d / 2);
    for (std::int64_t i = 0; i < d / 2; ++i)
      EXPECT_NEAR(f[i], 1.0 / std::pow(10000.0, 2.0 * i / d), 4e-7 * f[i]) << d << " " << i;
  }
}

// Llama 3.1's bands: wavelengths above original / low_freq_factor divided by factor, below
// original / high_freq_factor kept, between them smoothed; all three bands occur at this shape.
TEST(RopeFrequencies, Llama3ScalingInItsThreeBands) {
  const RopeScaling s{RopeScaling::Type::kLlama3, 8.0, 1.0, 4.0, 64.0};
  const std::vector<float> f = rope_inverse_frequencies(rope(32, 10000.0, s));
  int bands[3] = {};
  for (std::int64_t i = 0; i < 16; ++i) {
    const double base = 1.0 / std::pow(10000.0, 2.0 * i / 32),
                 wavelength = 2 * std::numbers::pi / base;
    double expected = base;
    if (wavelength > 64.0 / s.low_freq_factor) {
      expected = base / s.factor;
      ++bands[0];
    } else if (wavelength >= 64.0 / s.high_freq_factor) {
      const double smooth = (64.0 / wavelength - 1.0) / 3.0;
      expected = (1 - smooth) * base / s.factor + smooth * base;
      ++bands[1];
    } else {
      ++bands[2];
    }
    EXPECT_NEAR(f[i], expected, 1e-6 * expected) << "frequency " << i;
  }
  EXPECT_GT(bands[0], 0);
  EXPECT_GT(bands[1], 0);
  EXPECT_GT(bands[2], 0);
}

TEST(RopeFrequencies, TableHoldsCosinesThenSinesPerPosition) {
  const RopeParameters p = rope(6, 10.0);
  const std::vector<float> f = rope_inverse_frequencies(p), table = rope_table(p, 4);
  ASSERT_EQ(static_cast<std::int64_t>(table.size()), rope_table_elements(6, 4));
  for (std::int64_t position = 0; position < 4; ++position)
    for (std::int64_t i = 0; i < 3; ++i) {
      const double angle = static_cast<double>(static_cast<float>(position) * f[i]);
      EXPECT_NEAR(table[position * 6 + i], std::cos(angle), 1e-7);
      EXPECT_NEAR(table[position * 6 + 3 + i], std::sin(angle), 1e-7);
    }
}

TEST(RopeFrequencies, BadParametersAreRefusedByName) {
  auto message = [](const RopeParameters& p) {
    try {
      rope_inverse_frequencies(p);
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message(rope(7, 10000.0)).find("head_dim"), std::string::npos);
  EXPECT_NE(message(rope(8, 0.0)).find("rope_theta"), std::string::npos);
  RopeParameters p = rope(8, 10000.0);
  p.scaling = {RopeScaling::Type::kLlama3, 8.0, 4.0, 4.0, 8192.0};
  EXPECT_NE(message(p).find("high_freq_factor"), std::string::npos);
  p.scaling = {RopeScaling::Type::kLlama3, 0.0, 1.0, 4.0, 8192.0};
  EXPECT_NE(message(p).find("factor"), std::string::npos);
  p.scaling = {RopeScaling::Type::kLlama3, 8.0, 1.0, 4.0, 0.0};
  EXPECT_NE(message(p).find("original_max_position_embeddings"), std::string::npos);
}

}  // namespace
}  // namespace zero::gpt2
