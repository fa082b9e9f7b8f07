// The GPT-2 CUDA attention bodies run by the kernel emulator against the CPU kernels
// (gpt2_cuda_emulation.h): the plain kernels (attention_body.h) and the tiled ones
// (attention_flash_body.h, attention_flash_backward.h) elementwise, and the tiled forward's
// log-sum-exp against one computed in double; fp32 within 1e-5 relative L2 and each element within
// a bound measured per result (EXPECT_CLOSE); bf16 q, k, v and out through the tiled bodies as the
// CUDA kernels compose them.
#include <set>

#include "gpt2_cuda_emulation.h"
#include "zero/gpt2/reference_kernels.h"

namespace zero::gpt2::emulation_test {
namespace {

TEST_P(Gpt2CudaEmulation, AttentionMatchesTheCpuKernels) {
  struct Case {
    std::int64_t B, T, C, NH;
  };
  // T = 1; T past a warp's 32 lanes; head sizes 3 and 7 (C not a multiple of 4) and 65 (past two
  // rounds of a warp's lanes).
  for (const Case& k :
       {Case{1, 1, 6, 2}, Case{2, 5, 21, 3}, Case{1, 37, 12, 4}, Case{1, 6, 130, 2}}) {
    for (bool drop : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "B " << k.B << " T " << k.T << " C " << k.C << " NH "
                                        << k.NH << " dropout " << drop);
      const std::int64_t B = k.B, T = k.T, C = k.C, NH = k.NH;
      const DropoutSite dropout = dropout_site(drop);
      const auto qkv = random_vector(B * T * 3 * C, 1);
      auto out = nan_vector(B * T * C), att = nan_vector(B * NH * T * T);
      auto out_expected = out, att_expected = att;
      cpu::attention_forward(out_expected.data(), att_expected.data(), qkv.data(), B, T, C, NH,
                             dropout);
      emulate(cuda::row_warp_launch(B * NH * T), [&](auto& thread, auto&) {
        cuda::attention_forward_body(thread, out.data(), att.data(), qkv.data(), B, T, C, NH,
                                     dropout);
      });
      EXPECT_CLOSE(out, out_expected, 1e-6);
      EXPECT_CLOSE(att, att_expected, 5e-7);

      const auto dout = random_vector(B * T * C, 2);
      auto dqkv = nan_vector(B * T * 3 * C), datt = nan_vector(B * NH * T * T);
      auto dqkv_expected = dqkv, datt_expected = datt;
      cpu::attention_backward(dqkv_expected.data(), datt_expected.data(), dout.data(), qkv.data(),
                              att_expected.data(), B, T, C, NH, dropout);
      emulate(cuda::row_warp_launch(B * NH * T), [&](auto& thread, auto&) {
        cuda::attention_dpre_body(thread, datt.data(), dout.data(), qkv.data(), att.data(), B, T, C,
                                  NH, dropout);
      });
      emulate(cuda::elementwise_launch(B * T * C), [&](auto& thread, auto&) {
        cuda::attention_dqkv_body(thread, dqkv.data(), datt.data(), dout.data(), qkv.data(),
                                  att.data(), B, T, C, NH, dropout);
      });
      EXPECT_CLOSE(dqkv, dqkv_expected, 2e-6);
    }
  }
}

// The tiled attention's kernels emulated for padded head size HP: the forward, then the backward's
// row terms D (a warp per row, from the forward's out), dk/dv and dq launches, each over the grid
// attention_flash.cu launches.
template <int HP>
struct TiledAttention {
  using Shared = cuda::FlashShared<HP>;
  Order order;
  std::int64_t B, T, C, NH;
  DropoutSite dropout;

  template <typename Body>
  void emulate(int floats, Body&& body) const {
    kernels::emulation::run_grid(cuda::flash_launch(B, T, NH, floats), order, 0,
                                 [&](kernels::emulation::EmulatedThread& thread, void* shared) {
                                   body(thread, static_cast<float*>(shared));
                                 });
  }
  void forward(float* out, float* lse, const float* qkv) const {
    emulate(Shared::kForward, [&](auto& thread, float* shared) {
      cuda::flash_forward_body<HP>(thread, shared, out, lse, qkv, B, T, C, NH, dropout);
    });
  }
  void backward(float* dqkv, float* delta, const float* dout, const float* out, const float* qkv,
                const float* lse) const {
    kernels::emulation::run_grid(cuda::flash_delta_launch(B, T, NH), order, 0,
                                 [&](kernels::emulation::EmulatedThread& thread, void*) {
                                   cuda::flash_delta_body(thread, delta, dout, out, B, T, C, NH);
                                 });
    emulate(Shared::kKeys, [&](auto& thread, float* shared) {
      cuda::flash_dkv_body<HP>(thread, shared, dqkv, dout, qkv, lse, delta, B, T, C, NH, dropout);
    });
    emulate(Shared::kQueries, [&](auto& thread, float* shared) {
      cuda::flash_dq_body<HP>(thread, shared, dqkv, dout, qkv, lse, delta, B, T, C, NH, dropout);
    });
  }
};

// f(TiledAttention<HP>) for head size C / NH's padded size.
template <typename F>
void with_tiled(std::int64_t HS, F&& f) {
  switch (cuda::flash_head_bucket(HS)) {
    case 16: return f(std::integral_constant<int, 16>{});
    case 32: return f(std::integral_constant<int, 32>{});
    case 64: return f(std::integral_constant<int, 64>{});
    case 128: return f(std::integral_constant<int, 128>{});
    default: FAIL() << "head size " << HS << " has no tiled kernel";
  }
}

// D = Σ_d dout · out per (b, h, t) row, in double, at (b·NH + h)·T + t.
std::vector<float> row_terms(const std::vector<float>& dout, const std::vector<float>& out,
                             std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH) {
  const std::int64_t HS = C / NH;
  std::vector<float> delta(static_cast<std::size_t>(B * NH * T));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < NH; ++h)
      for (std::int64_t t = 0; t < T; ++t) {
        double dot = 0.0;
        for (std::int64_t i = 0; i < HS; ++i)
          dot += double(dout[(b * T + t) * C + h * HS + i]) * out[(b * T + t) * C + h * HS + i];
        delta[(b * NH + h) * T + t] = static_cast<float>(dot);
      }
  return delta;
}

bool all_nan(const std::vector<float>& values, std::size_t from) {
  return std::all_of(values.begin() + std::ptrdiff_t(from), values.end(),
                     [](float v) { return std::isnan(v); });
}

TEST_P(Gpt2CudaEmulation, TiledAttentionMatchesTheCpuKernels) {
  struct Case {
    std::int64_t B, T, C, NH;
  };
  // Head sizes 3, 7, 12, 25, 32, 64, 65 and 128 (every padded size: 16, 32, 64, 128; 32 at the
  // chaos soak's shape, n_embd 128 over 4 heads at T 64); T = 1, T below one tile of 64, one whole
  // tile, T past one tile by 1 and by 36, and two tiles with a partial second.
  const Case cases[] = {Case{1, 1, 6, 2},     Case{2, 5, 21, 3},  Case{1, 37, 48, 4},
                        Case{2, 100, 128, 2}, Case{1, 70, 36, 3}, Case{1, 65, 256, 2},
                        Case{1, 6, 130, 2},   Case{1, 70, 75, 3}, Case{2, 64, 128, 4}};
  std::set<int> buckets;
  for (const Case& k : cases) buckets.insert(cuda::flash_head_bucket(k.C / k.NH));
  EXPECT_EQ(buckets, (std::set<int>{16, 32, 64, 128}));
  for (const Case& k : cases) {
    for (float p : {0.0f, 0.1f}) {
      SCOPED_TRACE(::testing::Message() << "B " << k.B << " T " << k.T << " C " << k.C << " NH "
                                        << k.NH << " dropout " << p);
      const std::int64_t B = k.B, T = k.T, C = k.C, NH = k.NH, rows = B * NH * T;
      DropoutSite dropout = dropout_site(p > 0.0f);
      dropout.probability = p;
      const auto qkv = random_vector(B * T * 3 * C, 11), dout = random_vector(B * T * C, 12);
      auto out = nan_vector(B * T * C), att = nan_vector(B * NH * T * T);
      auto out_expected = out, att_expected = att;
      cpu::attention_forward(out_expected.data(), att_expected.data(), qkv.data(), B, T, C, NH,
                             dropout);
      auto dqkv = nan_vector(B * T * 3 * C), datt = nan_vector(B * NH * T * T);
      auto dqkv_expected = dqkv, datt_expected = datt;
      cpu::attention_backward(dqkv_expected.data(), datt_expected.data(), dout.data(), qkv.data(),
                              att_expected.data(), B, T, C, NH, dropout);
      with_tiled(C / NH, [&](auto bucket) {
        const TiledAttention<decltype(bucket)::value> tiled{GetParam(), B, T, C, NH, dropout};
        tiled.forward(out.data(), att.data(), qkv.data());
        tiled.backward(dqkv.data(), datt.data(), dout.data(), out.data(), qkv.data(), att.data());
      });
      EXPECT_CLOSE(out, out_expected, 3e-6);
      const std::vector<float> lse(att.begin(), att.begin() + rows);
      std::vector<float> lse_expected(lse.size());
      reference::attention_logsumexp(lse_expected.data(), qkv.data(), B, T, C, NH);
      expect_elementwise(lse, lse_expected, 1e-6, "log-sum-exp");
      EXPECT_TRUE(all_nan(att, std::size_t(rows))) << "att past the log-sum-exp is written";
      const std::vector<float> delta(datt.begin(), datt.begin() + rows);
      expect_elementwise(delta, row_terms(dout, out_expected, B, T, C, NH), 1e-5, "row terms D");
      EXPECT_TRUE(all_nan(datt, std::size_t(rows))) << "datt past the row terms is written";
      EXPECT_CLOSE(dqkv, dqkv_expected, 5e-6);
    }
  }
}

// bf16 q, k, v and out (attention_io_dtype) where the tiled kernels run the attention (a layout
// made for cuDNN that the device's cuDNN refused): CudaKernels widens qkv exactly, the tiled
// bodies compute in fp32 and out is rounded once, so each bf16 out element is the CPU oracle's
// out on those q, k, v rounded (within half a bf16 ulp, every element written), and the backward
// from the rounded out (its row terms D) stays within bf16 tolerance of the oracle's dqkv. The
// cuDNN path's bf16 values come from cuBLASLt and cuDNN, not from bodies: attention_cudnn_test
// and gpt2_compute_cuda_test check them on a GPU.
TEST_P(Gpt2CudaEmulation, Bf16AttentionActivationsAreTheFp32ValuesRounded) {
  struct Case {
    std::int64_t B, T, C, NH;
  };
  for (const Case& k : {Case{2, 70, 128, 2}, Case{1, 11, 24, 3}}) {
    SCOPED_TRACE(::testing::Message() << "T " << k.T << " C " << k.C << " NH " << k.NH);
    const std::int64_t B = k.B, T = k.T, C = k.C, NH = k.NH;
    auto qkv = random_vector(B * T * 3 * C, 21);
    for (float& value : qkv) value = to_float(to_bf16(value));  // the bf16 qkv, widened
    const auto dout = random_vector(B * T * C, 22);
    auto out_expected = nan_vector(B * T * C), att_expected = nan_vector(B * NH * T * T);
    auto dqkv_expected = nan_vector(B * T * 3 * C), datt_expected = att_expected;
    cpu::attention_forward(out_expected.data(), att_expected.data(), qkv.data(), B, T, C, NH, {});
    cpu::attention_backward(dqkv_expected.data(), datt_expected.data(), dout.data(), qkv.data(),
                            att_expected.data(), B, T, C, NH, {});
    auto out = nan_vector(B * T * C), lse = nan_vector(B * NH * T), delta = lse;
    auto dqkv = nan_vector(B * T * 3 * C);
    with_tiled(C / NH, [&](auto bucket) {
      const TiledAttention<decltype(bucket)::value> tiled{GetParam(), B, T, C, NH, {}};
      tiled.forward(out.data(), lse.data(), qkv.data());
      for (std::size_t i = 0; i < out.size(); ++i) {
        const double rounded = to_float(to_bf16(out[i])), expected = out_expected[i];
        ASSERT_LE(std::fabs(rounded - expected), 0.00390625 * std::fabs(expected) + 1e-6)
            << "element " << i << ": " << rounded << " vs " << expected;
        out[i] = static_cast<float>(rounded);  // what the backward reads of the bf16 out
      }
      tiled.backward(dqkv.data(), delta.data(), dout.data(), out.data(), qkv.data(), lse.data());
    });
    EXPECT_LE(zero::testing::relative_difference(dqkv, dqkv_expected), 1e-2);
  }
}

TEST(Gpt2CudaEmulationShapes, TiledAttentionCoversHeadsUpTo128) {
  EXPECT_EQ(cuda::flash_head_bucket(1), 16);
  EXPECT_EQ(cuda::flash_head_bucket(12), 16);
  EXPECT_EQ(cuda::flash_head_bucket(17), 32);
  EXPECT_EQ(cuda::flash_head_bucket(64), 64);
  EXPECT_EQ(cuda::flash_head_bucket(65), 128);
  EXPECT_EQ(cuda::flash_head_bucket(128), 128);
  EXPECT_EQ(cuda::flash_head_bucket(129), 0);  // the plain kernels
  EXPECT_EQ(cuda::flash_head_bucket(0), 0);
}

INSTANTIATE_TEST_SUITE_P(Orders, Gpt2CudaEmulation,
                         ::testing::Values(Order::kForward, Order::kReverse), order_name);

}  // namespace
}  // namespace zero::gpt2::emulation_test
