// The GPT-2 CUDA layer and row kernel bodies (model/gpt2/src/cuda/layers_body.h, rows_body.h) run
// on the CPU by the kernel emulator over the launch grids their launchers compute
// (gpt2_cuda_emulation.h), against the CPU kernels (zero/gpt2/layers_cpu.h): random inputs, odd
// sizes (C not a multiple of 32 or 4, T = 1, rows past a chunk of 256), dropout on and off,
// threads in forward and reverse order within each phase; fp32 within 1e-5 relative L2 and each
// element within a bound measured per result (EXPECT_CLOSE), 16-bit outputs within half a unit in
// the last place. The row kernels bit for bit against the CPU Kernels (make_kernels on the CPU
// backend) for fp32, bf16 and fp16 tables. A shared-memory race is an error (the emulator's check;
// e0ba3f2's racy layer norm backward fails it). The attention bodies are
// gpt2_cuda_attention_emulation_test's.
// Exempt (library calls, not our kernels): cuBLASLt's GEMMs behind cuda::gemm, matmul_forward and
// matmul_backward's products (gemm_cublaslt.cc); its host logic is gpt2_cuda_host_test's.
#include "gpt2_cuda_emulation.h"

namespace zero::gpt2::emulation_test {
namespace {

TEST_P(Gpt2CudaEmulation, EncoderMatchesTheCpuKernels) {
  for (const Shape& s : kShapes) {
    for (bool drop : {false, true}) {
      SCOPED_TRACE(::testing::Message()
                   << "B " << s.B << " T " << s.T << " C " << s.C << " dropout " << drop);
      const std::int64_t B = s.B, T = s.T, C = s.C, V = 11, N = B * T;
      const DropoutSite dropout = dropout_site(drop);
      const auto tokens = random_tokens(N, static_cast<int>(V), 1);
      const auto wte = random_vector(V * C, 2), wpe = random_vector(T * C, 3);
      auto expected = nan_vector(N * C), actual = expected;
      cpu::encoder_forward(expected.data(), tokens.data(), wte.data(), wpe.data(), B, T, C,
                           dropout);
      emulate(cuda::elementwise_launch(N * C), [&](auto& thread, auto&) {
        cuda::encoder_forward_body(thread, actual.data(), tokens.data(), wte.data(), wpe.data(), B,
                                   T, C, dropout);
      });
      EXPECT_CLOSE(actual, expected, 0.0);

      const auto dout = random_vector(N * C, 4);
      auto dwte = random_vector(V * C, 5), dwpe = random_vector(T * C, 6);
      auto dwte_expected = dwte, dwpe_expected = dwpe;
      cpu::encoder_backward(dwte_expected.data(), dwpe_expected.data(), dout.data(), tokens.data(),
                            B, T, C, dropout);
      const cuda::TokenBuckets grouped = cuda::token_buckets(tokens.data(), N);
      const std::int64_t K = grouped.buckets;
      const cuda::TokenTable parts = cuda::token_table(grouped.table.data(), K);
      emulate(cuda::elementwise_launch(K * C), [&](auto& thread, auto&) {
        cuda::encoder_wte_backward_body(thread, dwte.data(), dout.data(), parts.bucket_token,
                                        parts.bucket_begin, parts.rows, K, T, C, dropout);
      });
      emulate(cuda::elementwise_launch(T * C), [&](auto& thread, auto&) {
        cuda::encoder_wpe_backward_body(thread, dwpe.data(), dout.data(), B, T, C, dropout);
      });
      EXPECT_CLOSE(dwte, dwte_expected, 3e-6);
      EXPECT_CLOSE(dwpe, dwpe_expected, 1.5e-6);
    }
  }
}

TEST_P(Gpt2CudaEmulation, LayernormMatchesTheCpuKernels) {
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(::testing::Message() << "B " << s.B << " T " << s.T << " C " << s.C);
    const std::int64_t N = s.B * s.T, C = s.C;
    const auto inp = random_vector(N * C, 1, 2.0), weight = random_vector(C, 2),
               bias = random_vector(C, 3);
    auto out = nan_vector(N * C), mean = nan_vector(N), rstd = nan_vector(N);
    auto out_expected = out, mean_expected = mean, rstd_expected = rstd;
    cpu::layernorm_forward(out_expected.data(), mean_expected.data(), rstd_expected.data(),
                           inp.data(), weight.data(), bias.data(), N, C, kEpsilon);
    emulate(cuda::row_warp_launch(N), [&](auto& thread, auto&) {
      cuda::layernorm_forward_body(thread, out.data(), mean.data(), rstd.data(), inp.data(),
                                   weight.data(), bias.data(), N, C, kEpsilon);
    });
    EXPECT_CLOSE(out, out_expected, 1.5e-6);
    EXPECT_CLOSE(mean, mean_expected, 3e-7);
    EXPECT_CLOSE(rstd, rstd_expected, 2e-7);

    const auto dout = random_vector(N * C, 4);
    auto dinp = random_vector(N * C, 5), dweight = random_vector(C, 6), dbias = random_vector(C, 7);
    auto dinp_expected = dinp, dweight_expected = dweight, dbias_expected = dbias;
    cpu::layernorm_backward(dinp_expected.data(), dweight_expected.data(), dbias_expected.data(),
                            dout.data(), inp.data(), weight.data(), mean.data(), rstd.data(), N, C);
    emulate(cuda::row_warp_launch(N), [&](auto& thread, auto&) {
      cuda::layernorm_backward_input_body(thread, dinp.data(), dout.data(), inp.data(),
                                          weight.data(), mean.data(), rstd.data(), N, C);
    });
    column_sums(dweight.data(), dbias.data(),
                cuda::LayernormTerms{dout.data(), inp.data(), mean.data(), rstd.data()}, N, C);
    EXPECT_CLOSE(dinp, dinp_expected, 1e-6);
    EXPECT_CLOSE(dweight, dweight_expected, 1.5e-5);
    EXPECT_CLOSE(dbias, dbias_expected, 2e-5);

    // The one-pass backward (the two passes above are its fallback past the shared memory).
    auto dinp_fused = random_vector(N * C, 5), dweight_fused = random_vector(C, 6),
         dbias_fused = random_vector(C, 7);
    layernorm_backward(dinp_fused, dweight_fused, dbias_fused, dout, inp, weight, mean, rstd, N, C);
    EXPECT_CLOSE(dinp_fused, dinp_expected, 1e-6);
    EXPECT_CLOSE(dweight_fused, dweight_expected, 1.5e-5);
    EXPECT_CLOSE(dbias_fused, dbias_expected, 1.5e-5);

    auto bias_grad = random_vector(C, 8), bias_grad_expected = bias_grad;
    cpu::bias_backward(bias_grad_expected.data(), dout.data(), N, C);
    column_sums(bias_grad.data(), static_cast<float*>(nullptr), cuda::BiasTerms{dout.data()}, N, C);
    EXPECT_CLOSE(bias_grad, bias_grad_expected, 1.5e-5);

    // The 16-bit linear backward's pass: the same sums, bit for bit, and dout rounded (to nearest
    // even) into the staged copy, every element written once.
    auto staged_bias_grad = random_vector(C, 8);
    std::vector<BFloat16> staged(static_cast<std::size_t>(N * C), to_bf16(-1.0f));
    column_sums(staged_bias_grad.data(), static_cast<float*>(nullptr),
                cuda::StagedBiasTerms<BFloat16>{dout.data(), staged.data()}, N, C);
    EXPECT_EQ(staged_bias_grad, bias_grad);
    for (std::size_t i = 0; i < staged.size(); ++i)
      ASSERT_EQ(to_float(staged[i]), to_float(to_bf16(dout[i]))) << "element " << i;
  }
}

// fc's 16-bit backward pass (StagedGeluBiasTerms, gelu_bias_backward_staged): g = dout ⊙
// gelu'(x) rounded into the staging and summed into dbias, in one pass. Against the two passes it
// replaces, run the same way (gelu_backward_body, then StagedBiasTerms over the fp32 g): the
// staging and dbias bit for bit, the staging being that g rounded to nearest even. Against the
// CPU oracle (cpu::gelu_backward, cpu::bias_backward): g and dbias within 1e-5 relative L2.
TEST_P(Gpt2CudaEmulation, GeluStagedBiasPassMatchesTheUnfusedPasses) {
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(::testing::Message() << "N " << s.B * s.T << " C " << s.C);
    const std::int64_t N = s.B * s.T, C = s.C, n = N * C;
    const auto dout = random_vector(n, 1), preactivation = random_vector(n, 2, 3.0),
               initial = random_vector(C, 3);
    auto g_expected = nan_vector(n), dbias_expected = initial;
    cpu::gelu_backward(g_expected.data(), preactivation.data(), dout.data(), n);
    cpu::bias_backward(dbias_expected.data(), g_expected.data(), N, C);
    auto g = nan_vector(n);
    emulate(cuda::elementwise_launch(n), [&](auto& thread, auto&) {
      cuda::gelu_backward_body(thread, g.data(), preactivation.data(), dout.data(), n);
    });
    EXPECT_CLOSE(g, g_expected, 3e-5);
    auto check = [&](auto element, const char* name) {
      using T = decltype(element);
      SCOPED_TRACE(name);
      std::vector<T> staged(static_cast<std::size_t>(n), T{0xffff}), unfused_staged = staged;
      auto dbias = initial, unfused_dbias = initial;
      column_sums(dbias.data(), static_cast<float*>(nullptr),
                  cuda::StagedGeluBiasTerms<T>{dout.data(), preactivation.data(), staged.data()}, N,
                  C);
      column_sums(unfused_dbias.data(), static_cast<float*>(nullptr),
                  cuda::StagedBiasTerms<T>{g.data(), unfused_staged.data()}, N, C);
      EXPECT_EQ(dbias, unfused_dbias);
      EXPECT_CLOSE(dbias, dbias_expected, 2.5e-5);
      for (std::size_t i = 0; i < staged.size(); ++i) {
        ASSERT_EQ(staged[i].bits, unfused_staged[i].bits) << "element " << i;
        ASSERT_EQ(staged[i].bits, kernels::Element<T>::narrow(g[i]).bits) << "element " << i;
      }
    };
    check(BFloat16{}, "bf16");
    check(Float16{}, "fp16");
  }
}

// Past 256 chunks of kNormRows rows the chunk table's column sums take two row chunks; the last
// block has fewer rows than warps.
TEST_P(Gpt2CudaEmulation, LayernormBackwardSumsManyChunks) {
  const std::int64_t N = 256 * cuda::kNormRows + 3, C = 5;
  ASSERT_EQ(cuda::row_chunks(cuda::norm_chunks(N)), 2);
  const auto inp = random_vector(N * C, 1, 2.0), weight = random_vector(C, 2),
             bias = random_vector(C, 3), dout = random_vector(N * C, 4);
  std::vector<float> out(static_cast<std::size_t>(N * C)), mean(static_cast<std::size_t>(N)),
      rstd(static_cast<std::size_t>(N));
  cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), weight.data(),
                         bias.data(), N, C, kEpsilon);
  auto dinp = random_vector(N * C, 5), dweight = random_vector(C, 6), dbias = random_vector(C, 7);
  auto dinp_expected = dinp, dweight_expected = dweight, dbias_expected = dbias;
  cpu::layernorm_backward(dinp_expected.data(), dweight_expected.data(), dbias_expected.data(),
                          dout.data(), inp.data(), weight.data(), mean.data(), rstd.data(), N, C);
  layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
  EXPECT_CLOSE(dinp, dinp_expected, 1e-6);
  EXPECT_CLOSE(dweight, dweight_expected, 1e-5);
  EXPECT_CLOSE(dbias, dbias_expected, 5e-6);
}

// e0ba3f2's one-pass layer norm backward zeroed its warp's two shared rows as one run of 2·C
// columns, lane l taking columns l, l + 32, ...: when C % 32 != 0 a lane zeroed dbias entries that
// another lane of its warp then adds to, ordered by nothing but the row's shuffles. The emulator
// ran the lanes one after another between shuffles, so the sums came out right; racecheck caught
// it on an H100 (run 0306, fixed in 7f23a8a). Here that zeroing before the row function the body
// calls today: the emulator's race check fails it, in both thread orders.
TEST_P(Gpt2CudaEmulation, E0ba3f2sRacyLayernormBackwardIsARace) {
  const std::int64_t N = 6, C = 37;
  const auto inp = random_vector(N * C, 1, 2.0), weight = random_vector(C, 2),
             dout = random_vector(N * C, 4), mean = random_vector(N, 5), rstd = random_vector(N, 6);
  auto dinp = random_vector(N * C, 7);
  const LaunchConfig config = cuda::layernorm_backward_launch(N, C);
  try {
    kernels::emulation::run_grid(
        config, GetParam(), config.dynamic_shared_bytes,
        [&](kernels::emulation::EmulatedThread& thread, void* shared) {
          const int lane = kernels::lane_of(thread);
          const int warp = static_cast<int>(kernels::linear_thread(thread) / kernels::kWarpSize);
          const auto dweight = thread.shared(static_cast<float*>(shared)) + warp * 2 * C;
          const auto dbias = dweight + C;
          for (std::int64_t c = lane; c < 2 * C; c += kernels::kWarpSize) dweight[c] = 0.0f;
          for (std::int64_t row = warp; row < N; row += cuda::kNormWarps)
            cuda::layernorm_backward_row(thread, dinp.data() + row * C, dweight, dbias,
                                         dout.data() + row * C, inp.data() + row * C, weight.data(),
                                         mean[row], rstd[row], C, lane);
        });
    ADD_FAILURE() << "no race reported";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("shared-memory race (read after write)"), std::string::npos) << message;
    EXPECT_NE(message.find("a shuffle orders no memory"), std::string::npos) << message;
  }
}

// A residual + layer norm case: random inputs at `shape`, dropout on or off, and the CPU kernels'
// results on them (the oracle both residual tests compare with).
struct ResidualNormCase {
  std::int64_t B, T, C, N;
  DropoutSite dropout;
  std::vector<float> residual, inp, weight, bias;
  std::vector<float> sum, out, mean, rstd;  // the CPU kernels'
};
ResidualNormCase residual_norm_case(const Shape& s, bool drop) {
  const std::int64_t N = s.B * s.T, C = s.C;
  ResidualNormCase c{s.B,
                     s.T,
                     C,
                     N,
                     dropout_site(drop),
                     random_vector(N * C, 1),
                     random_vector(N * C, 2),
                     random_vector(C, 3),
                     random_vector(C, 4),
                     nan_vector(N * C),
                     nan_vector(N * C),
                     nan_vector(N),
                     nan_vector(N)};
  cpu::residual_dropout_forward(c.sum.data(), c.residual.data(), c.inp.data(), c.B, c.T, C,
                                c.dropout);
  cpu::layernorm_forward(c.out.data(), c.mean.data(), c.rstd.data(), c.sum.data(), c.weight.data(),
                         c.bias.data(), N, C, kEpsilon);
  return c;
}

// f(case) for every shape, dropout off and on, traced.
template <typename F>
void for_each_residual_norm_case(F&& f) {
  for (const Shape& s : kShapes)
    for (bool drop : {false, true}) {
      SCOPED_TRACE(::testing::Message()
                   << "B " << s.B << " T " << s.T << " C " << s.C << " dropout " << drop);
      f(residual_norm_case(s, drop));
    }
}

TEST_P(Gpt2CudaEmulation, ResidualLayernormAndDropoutMatchTheCpuKernels) {
  for_each_residual_norm_case([&](const ResidualNormCase& c) {
    const std::int64_t B = c.B, T = c.T, C = c.C, N = c.N;
    const DropoutSite& dropout = c.dropout;
    const auto &residual = c.residual, &inp = c.inp, &weight = c.weight, &bias = c.bias;
    const auto &sum_expected = c.sum, &out_expected = c.out, &mean_expected = c.mean,
               &rstd_expected = c.rstd;
    auto sum = nan_vector(N * C), out = nan_vector(N * C), mean = nan_vector(N),
         rstd = nan_vector(N);
    emulate(cuda::row_warp_launch(N), [&](auto& thread, auto&) {
      cuda::residual_layernorm_forward_body(thread, sum.data(), out.data(), mean.data(),
                                            rstd.data(), residual.data(), inp.data(), weight.data(),
                                            bias.data(), N, T, C, kEpsilon, dropout);
    });
    EXPECT_CLOSE(sum, sum_expected, 5e-7);
    EXPECT_CLOSE(out, out_expected, 2e-6);
    EXPECT_CLOSE(mean, mean_expected, 4e-7);
    EXPECT_CLOSE(rstd, rstd_expected, 4e-7);

    auto plain = nan_vector(N * C), plain_expected = plain;
    cpu::residual_dropout_forward(plain_expected.data(), residual.data(), inp.data(), B, T, C,
                                  dropout);
    emulate(cuda::elementwise_launch(N * C), [&](auto& thread, auto&) {
      cuda::residual_dropout_body(thread, plain.data(), residual.data(), inp.data(), N * C, T, C,
                                  dropout);
    });
    EXPECT_CLOSE(plain, plain_expected, 5e-7);
    auto dinp = nan_vector(N * C), dinp_expected = dinp;
    cpu::dropout_backward(dinp_expected.data(), inp.data(), B, T, C, dropout);
    emulate(cuda::elementwise_launch(N * C), [&](auto& thread, auto&) {
      cuda::residual_dropout_body(thread, dinp.data(), static_cast<const float*>(nullptr),
                                  inp.data(), N * C, T, C, dropout);
    });
    EXPECT_CLOSE(dinp, dinp_expected, 0.0);
  });
}

// The activations only GEMMs read (gemm_input_dtype: bf16 on CUDA with bf16 parameters) written
// by the same bodies into bf16: each element the CPU kernels' fp32 value rounded once (within half
// a bf16 unit, 2^-8 relative, beside the fp32 bodies' own 1e-5), every element written, and the
// fp32 results beside them (residual sum, mean, rstd) unchanged.
TEST_P(Gpt2CudaEmulation, SixteenBitActivationOutputsAreTheFp32ValuesRounded) {
  const BFloat16 unwritten = to_bf16(std::numeric_limits<float>::quiet_NaN());
  for_each_residual_norm_case([&](const ResidualNormCase& c) {
    const std::int64_t T = c.T, C = c.C, N = c.N;
    const DropoutSite& dropout = c.dropout;
    const auto &residual = c.residual, &inp = c.inp, &weight = c.weight, &bias = c.bias;
    const auto &sum = c.sum, &out = c.out, &mean = c.mean, &rstd = c.rstd;
    std::vector<BFloat16> out16(static_cast<std::size_t>(N * C), unwritten);
    auto sum16 = nan_vector(N * C), mean16 = nan_vector(N), rstd16 = nan_vector(N);
    emulate(cuda::row_warp_launch(N), [&](auto& thread, auto&) {
      cuda::residual_layernorm_forward_body(thread, sum16.data(), out16.data(), mean16.data(),
                                            rstd16.data(), residual.data(), inp.data(),
                                            weight.data(), bias.data(), N, T, C, kEpsilon, dropout);
    });
    expect_bf16_rounded(out16, out);
    EXPECT_CLOSE(sum16, sum, 5e-7);
    EXPECT_CLOSE(mean16, mean, 4e-7);
    EXPECT_CLOSE(rstd16, rstd, 4e-7);

    std::vector<BFloat16> plain16(static_cast<std::size_t>(N * C), unwritten);
    emulate(cuda::row_warp_launch(N), [&](auto& thread, auto&) {
      cuda::layernorm_forward_body(thread, plain16.data(), mean16.data(), rstd16.data(), sum.data(),
                                   weight.data(), bias.data(), N, C, kEpsilon);
    });
    expect_bf16_rounded(plain16, out);

    auto gelu = nan_vector(N * C);
    cpu::gelu_forward(gelu.data(), sum.data(), N * C);
    std::vector<BFloat16> gelu16(static_cast<std::size_t>(N * C), unwritten);
    emulate(cuda::elementwise_launch(N * C), [&](auto& thread, auto&) {
      cuda::gelu_forward_body(thread, gelu16.data(), sum.data(), N * C);
    });
    expect_bf16_rounded(gelu16, gelu);
  });
}

TEST_P(Gpt2CudaEmulation, GeluMatchesTheCpuKernels) {
  for (std::int64_t n : {1, 22, 1023}) {
    SCOPED_TRACE(n);
    const auto inp = random_vector(n, 1, 3.0), dout = random_vector(n, 2);
    auto out = nan_vector(n), out_expected = out;
    cpu::gelu_forward(out_expected.data(), inp.data(), n);
    emulate(cuda::elementwise_launch(n), [&](auto& thread, auto&) {
      cuda::gelu_forward_body(thread, out.data(), inp.data(), n);
    });
    EXPECT_CLOSE(out, out_expected, 2e-6);
    auto dinp = nan_vector(n), dinp_expected = dinp;
    cpu::gelu_backward(dinp_expected.data(), inp.data(), dout.data(), n);
    emulate(cuda::elementwise_launch(n), [&](auto& thread, auto&) {
      cuda::gelu_backward_body(thread, dinp.data(), inp.data(), dout.data(), n);
    });
    EXPECT_CLOSE(dinp, dinp_expected, 1e-5);
  }
}

TEST_P(Gpt2CudaEmulation, CrossentropyMatchesTheCpuKernels) {
  struct Case {
    std::int64_t N, V, Vp;
  };
  // V below and above a block's 256 threads, padded columns, a row of one column; label smoothing
  // off and at 0.1 (--label_smoothing_factor).
  for (const Case& k : {Case{7, 75, 80}, Case{3, 301, 320}, Case{2, 1, 1}, Case{5, 1000, 1013}}) {
    for (float smoothing : {0.0f, 0.1f}) {
      SCOPED_TRACE(::testing::Message() << "N " << k.N << " V " << k.V << " Vp " << k.Vp
                                        << " label smoothing " << smoothing);
      const std::int64_t N = k.N, V = k.V, Vp = k.Vp;
      const auto logits = random_vector(N * Vp, 1, 4.0);
      auto targets = random_tokens(N, static_cast<int>(V), 2);
      targets[0] = -100;                                // ignored
      if (N > 2) targets[N - 1] = static_cast<int>(V);  // past the vocabulary: ignored
      if (N > 3) targets[1] = static_cast<int>(V - 1);  // the last real column
      auto losses = nan_vector(N), lse = nan_vector(N), losses_expected = losses,
           lse_expected = lse;
      cpu::crossentropy_forward(losses_expected.data(), lse_expected.data(), logits.data(),
                                targets.data(), N, V, Vp, smoothing);
      emulate<cuda::CrossentropyShared>(cuda::row_block_launch(N), [&](auto& thread, auto& shared) {
        cuda::crossentropy_forward_body(thread, shared, losses.data(), lse.data(), logits.data(),
                                        targets.data(), V, Vp, smoothing);
      });
      EXPECT_CLOSE(losses, losses_expected, 5e-7);
      EXPECT_CLOSE(lse, lse_expected, 4e-7);
      for (std::int64_t row = 0; row < N; ++row) {
        const int target = targets[row];
        if (target < 0 || target >= V) {
          EXPECT_EQ(losses[row], 0.0f) << "row " << row;
        } else if (smoothing == 0.0f) {  // ε = 0: lse - z[target] bit for bit, as before ε
          EXPECT_EQ(losses[row], lse[row] - logits[row * Vp + target]) << "row " << row;
        }
      }

      const float scale = 1.0f / 3.0f;
      auto dlogits = logits, dlogits_expected = logits;
      cpu::crossentropy_backward(dlogits_expected.data(), lse_expected.data(), targets.data(), N, V,
                                 Vp, scale, smoothing);
      emulate(cuda::row_block_launch(N), [&](auto& thread, auto&) {  // in place, as the fp32 path
        cuda::crossentropy_backward_body(thread, dlogits.data(), dlogits.data(), lse.data(),
                                         targets.data(), V, Vp, scale, smoothing);
      });
      // Into a bf16 copy (the LM head's GEMM operand): each element the fp32 gradient rounded once.
      std::vector<BFloat16> dlogits16(logits.size(), to_bf16(-1.0f));
      emulate(cuda::row_block_launch(N), [&](auto& thread, auto&) {
        cuda::crossentropy_backward_body(thread, dlogits16.data(), logits.data(), lse.data(),
                                         targets.data(), V, Vp, scale, smoothing);
      });
      for (std::size_t i = 0; i < dlogits16.size(); ++i)
        ASSERT_EQ(to_float(dlogits16[i]), to_float(to_bf16(dlogits[i]))) << "element " << i;
      // bf16 logits (CUDA keeps them so with bf16 parameters): each widened exactly on load, so
      // the losses, logsumexp and gradient are the fp32 bodies' over the widened values, bit for
      // bit.
      std::vector<BFloat16> logits16(logits.size());
      std::vector<float> widened(logits.size());
      for (std::size_t i = 0; i < logits.size(); ++i) {
        logits16[i] = to_bf16(logits[i]);
        widened[i] = to_float(logits16[i]);
      }
      auto losses_widened = nan_vector(N), lse_widened = nan_vector(N), losses16 = nan_vector(N),
           lse16 = nan_vector(N);
      emulate<cuda::CrossentropyShared>(cuda::row_block_launch(N), [&](auto& thread, auto& shared) {
        cuda::crossentropy_forward_body(thread, shared, losses_widened.data(), lse_widened.data(),
                                        widened.data(), targets.data(), V, Vp, smoothing);
      });
      emulate<cuda::CrossentropyShared>(cuda::row_block_launch(N), [&](auto& thread, auto& shared) {
        cuda::crossentropy_forward_body(thread, shared, losses16.data(), lse16.data(),
                                        logits16.data(), targets.data(), V, Vp, smoothing);
      });
      EXPECT_EQ(losses16, losses_widened);
      EXPECT_EQ(lse16, lse_widened);
      std::vector<float> dwidened(widened.size());
      std::vector<BFloat16> dlogits16_from16(logits.size(), to_bf16(-1.0f));
      emulate(cuda::row_block_launch(N), [&](auto& thread, auto&) {
        cuda::crossentropy_backward_body(thread, dwidened.data(), widened.data(), lse16.data(),
                                         targets.data(), V, Vp, scale, smoothing);
        cuda::crossentropy_backward_body(thread, dlogits16_from16.data(), logits16.data(),
                                         lse16.data(), targets.data(), V, Vp, scale, smoothing);
      });
      for (std::size_t i = 0; i < dwidened.size(); ++i)
        ASSERT_EQ(to_float(dlogits16_from16[i]), to_float(to_bf16(dwidened[i]))) << "element " << i;
      // With V = 1 a counted row's gradient is scale·(1 - ε/V - (1 - ε)): zero up to rounding, so
      // no relative norm; every element within 1e-5 relative plus a floor of 1e-6 · scale.
      if (V > 1) {
        EXPECT_CLOSE(dlogits, dlogits_expected, 3e-7);
      }
      for (std::size_t i = 0; i < dlogits.size(); ++i) {
        EXPECT_NEAR(dlogits[i], dlogits_expected[i],
                    1e-5 * std::fabs(dlogits_expected[i]) + 1e-6 * scale)
            << "element " << i;
      }
      // Ignored rows and padded columns: gradient 0 exactly; each counted row's gradient sums to 0.
      for (std::int64_t row = 0; row < N; ++row) {
        const bool counted = targets[row] >= 0 && targets[row] < V;
        double sum = 0.0;
        for (std::int64_t c = 0; c < Vp; ++c) {
          const float d = dlogits[row * Vp + c];
          if (!counted || c >= V) {
            EXPECT_EQ(d, 0.0f) << "row " << row << " column " << c;
          }
          sum += d;
        }
        EXPECT_NEAR(sum, 0.0, 1e-5) << "row " << row;
      }
    }
  }
}

// `count` distinct rows of [0, V), in random order.
std::vector<int> distinct_rows(std::int64_t count, std::int64_t V, std::uint32_t seed) {
  std::vector<int> rows(static_cast<std::size_t>(V));
  std::iota(rows.begin(), rows.end(), 0);
  std::shuffle(rows.begin(), rows.end(), std::mt19937(seed));
  rows.resize(static_cast<std::size_t>(count));
  return rows;
}

// `values` in storage type T (rounded to nearest even, as the device narrows).
template <typename T>
std::vector<T> stored(const std::vector<float>& values) {
  std::vector<T> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = kernels::Element<T>::narrow(values[i]);
  return out;
}

// The first index whose bytes differ, -1 when none does (NaNs compare by their bits).
template <typename T>
std::int64_t first_difference(const std::vector<T>& actual, const std::vector<T>& expected) {
  if (actual.size() != expected.size()) return 0;
  for (std::size_t i = 0; i < actual.size(); ++i)
    if (std::memcmp(&actual[i], &expected[i], sizeof(T)) != 0) return static_cast<std::int64_t>(i);
  return -1;
}

}  // namespace

// (The fixture's member, defined in its own namespace.)
template <typename T>
void Gpt2CudaEmulation::expect_rows_match(DType dtype) {
  const std::unique_ptr<DeviceContext> context = make_cpu_context();
  const std::unique_ptr<Kernels> oracle = make_kernels(*context);
  Stream& stream = context->compute_stream();
  struct Case {
    std::int64_t V, count, C;
  };
  // C not a multiple of 32 or 4; every row of the table; 300 of 301 rows over a 256-thread block.
  for (const Case& k : {Case{11, 5, 37}, Case{1, 1, 3}, Case{301, 300, 70}, Case{40, 40, 1}}) {
    SCOPED_TRACE(::testing::Message()
                 << name_of(dtype) << " V " << k.V << " rows " << k.count << " C " << k.C);
    const std::int64_t V = k.V, U = k.count, C = k.C;
    const std::vector<int> rows = distinct_rows(U, V, 1);
    const std::vector<T> table = stored<T>(random_vector(V * C, 2));
    auto out = nan_vector(U * C), out_expected = out;
    oracle->widen_rows(stream, out_expected.data(), table.data(), dtype, rows.data(), U, C);
    stream.synchronize();
    emulate(cuda::rows_launch(U, C), [&](auto& thread, auto&) {
      cuda::widen_rows_body(thread, out.data(), table.data(), rows.data(), U, C);
    });
    EXPECT_EQ(first_difference(out, out_expected), -1) << "widen_rows";

    const auto in = random_vector(U * C, 3, 0.1);
    auto accumulated = table, accumulated_expected = table;
    oracle->accumulate_rows(stream, accumulated_expected.data(), dtype, in.data(), rows.data(), U,
                            C);
    stream.synchronize();
    emulate(cuda::rows_launch(U, C), [&](auto& thread, auto&) {
      cuda::accumulate_rows_body(thread, accumulated.data(), in.data(), rows.data(), U, C);
    });
    EXPECT_EQ(first_difference(accumulated, accumulated_expected), -1) << "accumulate_rows";
    EXPECT_NE(first_difference(accumulated, table), -1) << "accumulate_rows changed nothing";

    if (dtype != DType::kFloat32) continue;  // copy_rows moves fp32 rows only
    const std::vector<std::int64_t> wide(rows.begin(), rows.end());
    const auto source = random_vector(V * C, 4);
    for (bool scatter : {false, true}) {
      SCOPED_TRACE(scatter ? "copy_rows scatter" : "copy_rows gather");
      auto copied = scatter ? random_vector(V * C, 5) : nan_vector(U * C);
      auto copied_expected = copied;
      oracle->copy_rows(stream, copied_expected.data(), source.data(), wide.data(), U, C, scatter);
      stream.synchronize();
      emulate(cuda::rows_launch(U, C), [&](auto& thread, auto&) {
        cuda::copy_rows_body(thread, copied.data(), source.data(), wide.data(), U, C, scatter);
      });
      EXPECT_EQ(first_difference(copied, copied_expected), -1);
    }
  }
}

namespace {

TEST_P(Gpt2CudaEmulation, RowKernelsMatchTheCpuKernels) {
  expect_rows_match<float>(DType::kFloat32);
  expect_rows_match<BFloat16>(DType::kBFloat16);
  expect_rows_match<Float16>(DType::kFloat16);
}

INSTANTIATE_TEST_SUITE_P(Orders, Gpt2CudaEmulation,
                         ::testing::Values(Order::kForward, Order::kReverse), order_name);

}  // namespace
}  // namespace zero::gpt2::emulation_test
