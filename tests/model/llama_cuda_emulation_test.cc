// The Llama family's CUDA kernel bodies (model/gpt2/src/cuda/llama_body.h: RMSNorm with and
// without the fused residual, its backward's row and column passes, the rotary embedding, SwiGLU)
// run on the CPU by the kernel emulator over the launch grids their launchers compute
// (gpt2_cuda_emulation.h's fixture), against the CPU kernels (zero/gpt2/layers_cpu.h): random
// inputs, odd sizes (C not a multiple of 32 or 4, T = 1, rows past a chunk of 256), dropout on and
// off, GQA q and k heads of a qkv row with generation's position offset and llama3 frequencies,
// generation's attention over a KV cache (cached_attention_body.h: grouped-query heads, rows at an
// offset, positions past the cache never read), threads in forward and reverse order; fp32 within
// 1e-5 relative L2 and each element within a bound measured per result (EXPECT_CLOSE), bf16 outputs
// the fp32 value rounded once.
#include <cmath>
#include <limits>
#include <vector>

#include "cached_attention_body.h"
#include "gpt2_cuda_emulation.h"
#include "llama_body.h"
#include "zero/gpt2/kernels.h"
#include "zero/gpt2/layers_cpu.h"
#include "zero/gpt2/rope.h"

namespace zero::gpt2::emulation_test {
namespace {

class LlamaCudaEmulation : public Gpt2CudaEmulation {};

constexpr float kRmsEpsilon = 1e-6f;

std::vector<BFloat16> unwritten_bf16(std::int64_t count) {
  return std::vector<BFloat16>(static_cast<std::size_t>(count),
                               to_bf16(std::numeric_limits<float>::quiet_NaN()));
}

TEST_P(LlamaCudaEmulation, RmsNormMatchesTheCpuKernels) {
  for (const Shape& s : kShapes)
    for (bool drop : {false, true}) {
      SCOPED_TRACE(::testing::Message()
                   << "B " << s.B << " T " << s.T << " C " << s.C << " dropout " << drop);
      const std::int64_t T = s.T, C = s.C, N = s.B * s.T;
      const DropoutSite dropout = dropout_site(drop);
      const auto residual = random_vector(N * C, 1), inp = random_vector(N * C, 2),
                 weight = random_vector(C, 3);
      auto sum_expected = nan_vector(N * C), out_expected = nan_vector(N * C),
           rstd_expected = nan_vector(N);
      cpu::residual_dropout_forward(sum_expected.data(), residual.data(), inp.data(), s.B, T, C,
                                    dropout);
      cpu::rmsnorm_forward(out_expected.data(), rstd_expected.data(), sum_expected.data(),
                           weight.data(), N, C, kRmsEpsilon);
      auto sum = nan_vector(N * C), out = nan_vector(N * C), rstd = nan_vector(N);
      emulate(cuda::row_warp_launch(N), [&](auto& thread, auto&) {
        cuda::residual_rmsnorm_forward_body(thread, sum.data(), out.data(), rstd.data(),
                                            residual.data(), inp.data(), weight.data(), N, T, C,
                                            kRmsEpsilon, dropout);
      });
      EXPECT_CLOSE(sum, sum_expected, 5e-7);
      EXPECT_CLOSE(out, out_expected, 1e-6);
      EXPECT_CLOSE(rstd, rstd_expected, 4e-7);

      auto plain = nan_vector(N * C), plain_rstd = nan_vector(N);
      emulate(cuda::row_warp_launch(N), [&](auto& thread, auto&) {
        cuda::rmsnorm_forward_body(thread, plain.data(), plain_rstd.data(), sum_expected.data(),
                                   weight.data(), N, C, kRmsEpsilon);
      });
      EXPECT_CLOSE(plain, out_expected, 1e-6);
      EXPECT_CLOSE(plain_rstd, rstd_expected, 4e-7);
      // The activation a bf16 GEMM reads (gemm_input_dtype), rounded once.
      std::vector<BFloat16> out16 = unwritten_bf16(N * C);
      emulate(cuda::row_warp_launch(N), [&](auto& thread, auto&) {
        cuda::residual_rmsnorm_forward_body(thread, sum.data(), out16.data(), rstd.data(),
                                            residual.data(), inp.data(), weight.data(), N, T, C,
                                            kRmsEpsilon, dropout);
      });
      expect_bf16_rounded(out16, out_expected);
      if (drop) continue;  // the backward has no dropout

      // dinp by rows, dweight by the fixed-order column sums; both accumulate.
      const auto dout = random_vector(N * C, 4);
      auto dinp = random_vector(N * C, 5), dweight = random_vector(C, 6);
      auto dinp_expected = dinp, dweight_expected = dweight;
      cpu::rmsnorm_backward(dinp_expected.data(), dweight_expected.data(), dout.data(),
                            sum_expected.data(), weight.data(), rstd_expected.data(), N, C);
      emulate(cuda::row_warp_launch(N), [&](auto& thread, auto&) {
        cuda::rmsnorm_backward_input_body(thread, dinp.data(), dout.data(), sum_expected.data(),
                                          weight.data(), rstd_expected.data(), N, C);
      });
      column_sums(dweight.data(), static_cast<float*>(nullptr),
                  cuda::RmsnormTerms{dout.data(), sum_expected.data(), rstd_expected.data()}, N, C);
      EXPECT_CLOSE(dinp, dinp_expected, 1.5e-6);
      EXPECT_CLOSE(dweight, dweight_expected, 2.5e-5);
    }
}

// A rotation's shape: the q and k heads (NH + NKV) leading a qkv row of NH + 2·NKV heads.
struct RopeShape {
  std::int64_t B, T, NH, NKV, head_dim, offset;
};
// Heads of 10 channels (5 pairs: no multiple of 4), a single position, and Llama-like heads of 64
// at a generation offset over 3 × 33 rows.
const RopeShape kRopeShapes[] = {{2, 5, 2, 1, 10, 0}, {1, 1, 1, 1, 2, 3}, {3, 33, 4, 2, 64, 17}};

TEST_P(LlamaCudaEmulation, RopeMatchesTheCpuKernels) {
  const RopeScaling llama3{RopeScaling::Type::kLlama3, 8.0, 1.0, 4.0, 64.0};
  for (const RopeShape& s : kRopeShapes) {
    SCOPED_TRACE(::testing::Message()
                 << "B " << s.B << " T " << s.T << " heads " << s.NH << "+" << s.NKV << " head_dim "
                 << s.head_dim << " offset " << s.offset);
    const RopeLayout layout{s.B,     s.T, s.NH + s.NKV, s.head_dim, (s.NH + 2 * s.NKV) * s.head_dim,
                            s.offset};
    const std::vector<float> table = rope_table({s.head_dim, 500000.0, llama3}, s.offset + s.T);
    const std::int64_t rows = s.B * s.T, n = rows * layout.row_stride;
    const LaunchConfig launch = cuda::elementwise_launch(rows * layout.heads * s.head_dim / 2);
    const auto x = random_vector(n, 7);
    for (float sign : {1.0f, -1.0f}) {
      SCOPED_TRACE(sign > 0 ? "forward" : "backward");
      auto expected = x, actual = x;
      if (sign > 0)
        cpu::rope_forward(expected.data(), table.data(), layout);
      else
        cpu::rope_backward(expected.data(), table.data(), layout);
      emulate(launch, [&](auto& thread, auto&) {
        cuda::rope_body(thread, actual.data(), table.data(), rows, s.T, layout.heads, s.head_dim,
                        layout.row_stride, s.offset, sign);
      });
      EXPECT_CLOSE(actual, expected, 4e-7);  // v's channels too: untouched on both sides
      // 16-bit q and k (attention_io_dtype's bf16 qkv): the fp32 rotation of the bf16 values,
      // rounded once.
      std::vector<BFloat16> x16(x.size());
      std::vector<float> widened(x.size());
      for (std::size_t i = 0; i < x.size(); ++i) widened[i] = to_float(x16[i] = to_bf16(x[i]));
      auto rotated16 = widened;
      cpu::rope_forward(rotated16.data(), table.data(), layout);
      if (sign < 0) {
        rotated16 = widened;
        cpu::rope_backward(rotated16.data(), table.data(), layout);
      }
      emulate(launch, [&](auto& thread, auto&) {
        cuda::rope_body(thread, x16.data(), table.data(), rows, s.T, layout.heads, s.head_dim,
                        layout.row_stride, s.offset, sign);
      });
      expect_bf16_rounded(x16, rotated16);
    }
  }
}

TEST_P(LlamaCudaEmulation, SwigluMatchesTheCpuKernels) {
  for (const Shape& s : kShapes) {
    const std::int64_t N = s.B * s.T, H = s.C;
    SCOPED_TRACE(::testing::Message() << "N " << N << " H " << H);
    const auto inp = random_vector(N * 2 * H, 8, 3.0), dout = random_vector(N * H, 9);
    auto out_expected = nan_vector(N * H), out = nan_vector(N * H);
    cpu::swiglu_forward(out_expected.data(), inp.data(), N, H);
    emulate(cuda::elementwise_launch(N * H), [&](auto& thread, auto&) {
      cuda::swiglu_forward_body(thread, out.data(), inp.data(), N, H);
    });
    EXPECT_CLOSE(out, out_expected, 1e-6);
    std::vector<BFloat16> out16 = unwritten_bf16(N * H);
    emulate(cuda::elementwise_launch(N * H), [&](auto& thread, auto&) {
      cuda::swiglu_forward_body(thread, out16.data(), inp.data(), N, H);
    });
    expect_bf16_rounded(out16, out_expected);

    auto dinp_expected = nan_vector(N * 2 * H), dinp = nan_vector(N * 2 * H);
    cpu::swiglu_backward(dinp_expected.data(), dout.data(), inp.data(), N, H);
    emulate(cuda::elementwise_launch(N * H), [&](auto& thread, auto&) {
      cuda::swiglu_backward_body(thread, dinp.data(), dout.data(), inp.data(), N, H);
    });
    EXPECT_CLOSE(dinp, dinp_expected, 1.5e-6);
  }
}

TEST_P(LlamaCudaEmulation, RepeatKvMatchesTheCpuKernels) {
  const std::int64_t N = 3, NH = 6, HS = 5;
  for (std::int64_t KVH : {1, 2, 6}) {
    SCOPED_TRACE(::testing::Message() << "KVH " << KVH);
    const std::int64_t width = (NH + 2 * KVH) * HS, heads = 3 * NH * HS;
    const auto qkv = random_vector(N * width, 10);
    auto expected = nan_vector(N * heads), out = nan_vector(N * heads);
    cpu::repeat_kv_forward(expected.data(), qkv.data(), sizeof(float), N, NH, KVH, HS);
    emulate(cuda::elementwise_launch(N * heads), [&](auto& thread, auto&) {
      cuda::repeat_kv_forward_body(thread, out.data(), qkv.data(), N, NH, KVH, HS);
    });
    EXPECT_EQ(out, expected);
    const auto dheads = random_vector(N * heads, 11);
    auto dqkv_expected = nan_vector(N * width), dqkv = nan_vector(N * width);
    cpu::repeat_kv_backward(dqkv_expected.data(), dheads.data(), N, NH, KVH, HS);
    emulate(cuda::elementwise_launch(N * width), [&](auto& thread, auto&) {
      cuda::repeat_kv_backward_body(thread, dqkv.data(), dheads.data(), N, NH, KVH, HS);
    });
    EXPECT_CLOSE(dqkv, dqkv_expected, 1e-6);
  }
}

// Generation's attention over a KV cache (cached_attention_body.h): one query at the cache's
// start, a GQA step late in the cache, prefill rows at an offset, heads of 33 and of the widest
// 256 channels; cache positions past the rows' are NaN, so reading one shows.
TEST_P(LlamaCudaEmulation, CachedAttentionMatchesTheCpuKernels) {
  struct CacheShape {
    std::int64_t Q, first, max_positions, NH, KVH, HS;
  };
  const CacheShape shapes[] = {{1, 0, 1, 1, 1, 8},
                               {1, 40, 48, 6, 2, 10},
                               {5, 3, 9, 4, 4, 33},
                               {2, 6, 8, 2, 1, kCachedAttentionMaxHeadSize}};
  for (const CacheShape& s : shapes) {
    SCOPED_TRACE(::testing::Message() << "Q " << s.Q << " first " << s.first << " NH " << s.NH
                                      << " KVH " << s.KVH << " HS " << s.HS);
    const std::int64_t stride = (s.NH + 2 * s.KVH) * s.HS, cache = s.KVH * s.max_positions * s.HS;
    const auto q = random_vector(s.Q * stride, 12);
    auto keys = random_vector(cache, 13, 2.0), values = random_vector(cache, 14);
    for (std::int64_t i = 0; i < cache; ++i)
      if (i / s.HS % s.max_positions >= s.first + s.Q)
        keys[i] = values[i] = std::numeric_limits<float>::quiet_NaN();
    auto expected = nan_vector(s.Q * s.NH * s.HS), out = nan_vector(s.Q * s.NH * s.HS);
    CachedAttention call{expected.data(), q.data(),        stride, keys.data(), values.data(), s.Q,
                         s.first,         s.max_positions, s.NH,   s.KVH,       s.HS};
    cpu::cached_attention_forward(call);
    call.out = out.data();
    emulate(cuda::cached_attention_launch(s.Q, s.NH),
            [&](auto& thread, auto&) { cuda::cached_attention_body(thread, call); });
    // A 256-channel head summed in another order than the CPU kernel's: the worst element was
    // 1.16e-6 apart in the ASan+UBSan build (its code generation), under 1e-6 in the release one.
    EXPECT_CLOSE(out, expected, 3e-6);
  }
}

INSTANTIATE_TEST_SUITE_P(Orders, LlamaCudaEmulation,
                         ::testing::Values(Order::kForward, Order::kReverse), order_name);

}  // namespace
}  // namespace zero::gpt2::emulation_test
