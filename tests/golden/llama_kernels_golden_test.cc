// Golden test: zero's Llama-family CPU kernels (layers_cpu.h, rope.h) against transformers 4.46's
// own modules (tests/golden/llama_kernels_reference.py through ZERO_PYTHON, float64 with autograd
// for the backward): LlamaRMSNorm forward and backward; LlamaRotaryEmbedding's inverse
// frequencies and cos/sin (default, and rope_scaling llama3 with all three of its bands, at Llama
// 3.1's own shape past position 8000) and apply_rotary_pos_emb on the q and k heads of a GQA qkv
// row, forward and backward; LlamaMLP's silu(gate) · up, forward and backward. Each comparison is
// elementwise, |zero - HF| / max(1, |HF|), printed with its bound. Skips (exit 77) without torch
// and transformers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../common/golden.h"
#include "../common/random_inputs.h"
#include "../common/test_data.h"
#include "zero/gpt2/layers_cpu.h"
#include "zero/gpt2/rope.h"

namespace zero::gpt2 {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::random_vector;

std::vector<double> doubles(const json& values) { return values.get<std::vector<double>>(); }

// Every element within bound · max(floor, |expected|); prints the largest difference measured.
// Bounds are about three times the differences measured (fp32 against float64).
void expect_elementwise(const std::string& what, const std::vector<float>& actual,
                        const std::vector<double>& expected, double bound, double floor = 1.0) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  double worst = 0.0;
  std::size_t at = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const double difference =
        std::fabs(actual[i] - expected[i]) / std::max(floor, std::fabs(expected[i]));
    if (!(difference <= worst)) worst = difference, at = i;
  }
  std::printf("  %-40s elementwise %.3g (bound %.0e)\n", what.c_str(), worst, bound);
  EXPECT_LE(worst, bound) << what << ": element " << at << ": " << actual[at] << " vs "
                          << expected[at];
}

struct RopeCase {
  std::int64_t B, T, NH, NKV, head_dim;
  double theta;
  std::int64_t offset;
  RopeScaling scaling;
};
// Default (theta 10000), llama3 at a shape where all three bands occur (head_dim 64, theta 500000,
// original 64), and Llama 3.1 8B's own (head_dim 128, theta 500000, factor 8, original 8192) at
// positions past 8000, a generation step's offset into its KV cache.
const RopeCase kRopeCases[] = {
    {2, 9, 4, 2, 16, 10000.0, 0, {}},
    {2, 7, 3, 1, 64, 500000.0, 5, {RopeScaling::Type::kLlama3, 8.0, 1.0, 4.0, 64.0}},
    {1, 5, 2, 1, 128, 500000.0, 8000, {RopeScaling::Type::kLlama3, 8.0, 1.0, 4.0, 8192.0}},
};

class LlamaKernelsGolden : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    folder_ = new fs::path(zero::testing::scratch_dir("llama_kernels_golden"));
    std::ofstream(*folder_ / "in.json") << inputs().dump();
    status_ = zero::testing::run_golden_script(
        "llama_kernels_reference.py",
        "\"" + (*folder_ / "in.json").string() + "\" \"" + (*folder_ / "out.json").string() + "\"");
    if (status_ == 0) *reference_ = json::parse(std::ifstream(*folder_ / "out.json"));
  }
  static void TearDownTestSuite() {
    fs::remove_all(*folder_);
    delete folder_;
  }
  void SetUp() override {
    if (status_ == 3 || status_ == 127)
      GTEST_SKIP() << "python3 with torch and transformers is not available (ZERO_PYTHON)";
    ASSERT_EQ(status_, 0) << "tests/golden/llama_kernels_reference.py failed";
  }

  static json inputs() {
    json in;
    // Row 0's mean square (about 1e-6) is of epsilon's size, so where epsilon is added shows.
    std::vector<float> x = random_vector(kN * kC, 1, 2.0);
    for (std::int64_t c = 0; c < kC; ++c) x[c] *= 5e-4f;
    in["rmsnorm"] = {{"N", kN},
                     {"C", kC},
                     {"eps", kEpsilon},
                     {"x", x},
                     {"weight", random_vector(kC, 2)},
                     {"dout", random_vector(kN * kC, 3)}};
    std::uint32_t seed = 10;
    for (const RopeCase& c : kRopeCases) {
      json scaling = nullptr;
      if (c.scaling.type == RopeScaling::Type::kLlama3)
        scaling = {{"factor", c.scaling.factor},
                   {"low_freq_factor", c.scaling.low_freq_factor},
                   {"high_freq_factor", c.scaling.high_freq_factor},
                   {"original_max_position_embeddings",
                    static_cast<std::int64_t>(c.scaling.original_max_position_embeddings)}};
      const std::int64_t rows = c.B * c.T;
      in["rope"].push_back({{"B", c.B},
                            {"T", c.T},
                            {"NH", c.NH},
                            {"NKV", c.NKV},
                            {"head_dim", c.head_dim},
                            {"theta", c.theta},
                            {"offset", c.offset},
                            {"scaling", scaling},
                            {"q", random_vector(rows * c.NH * c.head_dim, seed++)},
                            {"k", random_vector(rows * c.NKV * c.head_dim, seed++)},
                            {"dq_out", random_vector(rows * c.NH * c.head_dim, seed++)},
                            {"dk_out", random_vector(rows * c.NKV * c.head_dim, seed++)}});
    }
    in["swiglu"] = {{"N", kN},
                    {"H", kH},
                    {"x", random_vector(kN * 2 * kH, 4, 4.0)},
                    {"dout", random_vector(kN * kH, 5)}};
    return in;
  }
  static const json& reference() { return *reference_; }

  static constexpr std::int64_t kN = 7, kC = 37, kH = 29;
  static constexpr float kEpsilon = 1e-6f;
  static inline fs::path* folder_ = nullptr;
  static inline json* reference_ = new json;
  static inline int status_ = 0;
};

TEST_F(LlamaKernelsGolden, RmsNormIsLlamaRMSNorm) {
  const json in = inputs()["rmsnorm"];
  const auto x = in["x"].get<std::vector<float>>(), weight = in["weight"].get<std::vector<float>>(),
             dout = in["dout"].get<std::vector<float>>();
  std::vector<float> out(kN * kC), rstd(kN), dx(kN * kC, 0.0f), dweight(kC, 0.0f);
  cpu::rmsnorm_forward(out.data(), rstd.data(), x.data(), weight.data(), kN, kC, kEpsilon);
  cpu::rmsnorm_backward(dx.data(), dweight.data(), dout.data(), x.data(), weight.data(),
                        rstd.data(), kN, kC);
  const json& hf = reference()["rmsnorm"];
  expect_elementwise("rmsnorm out", out, doubles(hf["out"]), 2e-7);
  // LlamaRMSNorm normalises in fp32 whatever its input's dtype, so its own gradient carries fp32
  // rounding, amplified in row 0 (rstd about 700) by the cancellation of dinp's two terms.
  expect_elementwise("rmsnorm dinp", dx, doubles(hf["dx"]), 2e-5);
  expect_elementwise("rmsnorm dweight", dweight, doubles(hf["dweight"]), 5e-7);
}

// q and k placed in a qkv row [q | k | v] (v random, untouched), rotated in place by one call over
// NH + NKV heads, and the backward likewise on dq, dk.
TEST_F(LlamaKernelsGolden, RopeIsLlamaRotaryEmbeddingAndApplyRotaryPosEmb) {
  const json in = inputs()["rope"];
  for (std::size_t n = 0; n < std::size(kRopeCases); ++n) {
    const RopeCase& c = kRopeCases[n];
    const json& hf = reference()["rope"][n];
    SCOPED_TRACE("case " + std::to_string(n));
    const RopeParameters parameters{c.head_dim, c.theta, c.scaling};
    // Inverse frequencies, relative to each: theta^x is torch's fp32 pow (Sleef, within 1 ulp),
    // here pow in double rounded once, so an fp32 value may differ in its last place (2^-23).
    expect_elementwise("inv_freq", rope_inverse_frequencies(parameters), doubles(hf["inv_freq"]),
                       1.2e-7, 1e-30);
    const std::vector<float> table = rope_table(parameters, c.offset + c.T);
    std::vector<float> cosines, sines;
    for (std::int64_t t = 0; t < c.T; ++t) {
      const float* row = table.data() + (c.offset + t) * c.head_dim;
      for (int copy = 0; copy < 2; ++copy) {  // HF's cat((freqs, freqs))
        cosines.insert(cosines.end(), row, row + c.head_dim / 2);
        sines.insert(sines.end(), row + c.head_dim / 2, row + c.head_dim);
      }
    }
    expect_elementwise("cos", cosines, doubles(hf["cos"]), 1.2e-7);
    expect_elementwise("sin", sines, doubles(hf["sin"]), 1.2e-7);

    const std::int64_t q_width = c.NH * c.head_dim, k_width = c.NKV * c.head_dim;
    const std::int64_t stride = q_width + 2 * k_width, rows = c.B * c.T;
    const RopeLayout layout{c.B, c.T, c.NH + c.NKV, c.head_dim, stride, c.offset};
    auto rotate = [&](const char* q_name, const char* k_name, bool backward) {
      const auto q = in[n][q_name].get<std::vector<float>>();
      const auto k = in[n][k_name].get<std::vector<float>>();
      std::vector<float> qkv = random_vector(rows * stride, 99);
      const std::vector<float> v_before = qkv;
      for (std::int64_t row = 0; row < rows; ++row) {
        std::copy_n(q.begin() + row * q_width, q_width, qkv.begin() + row * stride);
        std::copy_n(k.begin() + row * k_width, k_width, qkv.begin() + row * stride + q_width);
      }
      if (backward)
        cpu::rope_backward(qkv.data(), table.data(), layout);
      else
        cpu::rope_forward(qkv.data(), table.data(), layout);
      std::vector<float> q_out, k_out;
      std::int64_t v_changed = 0;
      for (std::int64_t row = 0; row < rows; ++row) {
        const auto begin = qkv.begin() + row * stride;
        q_out.insert(q_out.end(), begin, begin + q_width);
        k_out.insert(k_out.end(), begin + q_width, begin + q_width + k_width);
        for (std::int64_t i = q_width + k_width; i < stride; ++i)
          v_changed += qkv[row * stride + i] != v_before[row * stride + i];
      }
      EXPECT_EQ(v_changed, 0) << "elements of v changed";
      return std::make_pair(q_out, k_out);
    };
    const auto [q_out, k_out] = rotate("q", "k", false);
    expect_elementwise("rope q", q_out, doubles(hf["q"]), 5e-7);
    expect_elementwise("rope k", k_out, doubles(hf["k"]), 5e-7);
    const auto [dq, dk] = rotate("dq_out", "dk_out", true);
    expect_elementwise("rope dq", dq, doubles(hf["dq"]), 5e-7);
    expect_elementwise("rope dk", dk, doubles(hf["dk"]), 5e-7);
  }
}

TEST_F(LlamaKernelsGolden, SwigluIsSiluOfGateTimesUp) {
  const json in = inputs()["swiglu"];
  const auto x = in["x"].get<std::vector<float>>(), dout = in["dout"].get<std::vector<float>>();
  std::vector<float> out(kN * kH), dx(kN * 2 * kH);
  cpu::swiglu_forward(out.data(), x.data(), kN, kH);
  cpu::swiglu_backward(dx.data(), dout.data(), x.data(), kN, kH);
  const json& hf = reference()["swiglu"];
  expect_elementwise("swiglu out", out, doubles(hf["out"]), 4e-7);
  expect_elementwise("swiglu dinp [dgate | dup]", dx, doubles(hf["dx"]), 1e-6);
}

}  // namespace
}  // namespace zero::gpt2
