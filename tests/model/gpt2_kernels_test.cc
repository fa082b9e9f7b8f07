// GPT-2 CPU kernels against their scalar references on random inputs (odd sizes included), and
// finite-difference gradient checks of every reference kernel in double precision.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "../common/kernel_checks.h"
#include "../common/random_inputs.h"
#include "zero/gpt2/layers_cpu.h"
#include "zero/gpt2/reference_kernels.h"

namespace zero::gpt2 {
namespace {

using testing::random_tokens;
using testing::random_vector;
using zero::testing::check_gradient;
using zero::testing::dot;
using zero::testing::expect_near_all;

DropoutSite make_dropout(float probability) {
  DropoutSite dropout;
  dropout.probability = probability;
  dropout.key = derive_key(42, 7);
  dropout.sample_offset = 5;
  return dropout;
}

struct Shape {
  std::int64_t B, T, C, NH;
};
class KernelsAgainstReference : public ::testing::TestWithParam<Shape> {};

TEST_P(KernelsAgainstReference, LayerNormMatmulGeluResidual) {
  const auto [B, T, C, NH] = GetParam();
  const std::int64_t N = B * T, OC = 3 * C + 1;
  const auto inp = random_vector(N * C, 1), weight = random_vector(C, 2),
             bias = random_vector(C, 3);
  std::vector<float> out(N * C), mean(N), rstd(N), ref_out(N * C), ref_mean(N), ref_rstd(N);
  cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), weight.data(),
                         bias.data(), N, C, 1e-5f);
  reference::layernorm_forward(ref_out.data(), ref_mean.data(), ref_rstd.data(), inp.data(),
                               weight.data(), bias.data(), N, C, 1e-5f);
  expect_near_all(out, ref_out, 1e-5, "layernorm out");
  const auto dout = random_vector(N * C, 4);
  std::vector<float> dinp(N * C, 0.5f), dweight(C, 0.25f), dbias(C, 0.125f);
  auto ref_dinp = dinp, ref_dweight = dweight, ref_dbias = dbias;
  cpu::layernorm_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(),
                          weight.data(), mean.data(), rstd.data(), N, C);
  reference::layernorm_backward(ref_dinp.data(), ref_dweight.data(), ref_dbias.data(), dout.data(),
                                inp.data(), weight.data(), ref_mean.data(), ref_rstd.data(), N, C);
  expect_near_all(dinp, ref_dinp, 1e-4, "layernorm dinp");
  expect_near_all(dweight, ref_dweight, 1e-4, "layernorm dweight");
  expect_near_all(dbias, ref_dbias, 1e-4, "layernorm dbias");

  const auto w = random_vector(C * OC, 5), b = random_vector(OC, 6);
  std::vector<float> y(N * OC), ref_y(N * OC);
  cpu::matmul_forward(y.data(), inp.data(), w.data(), b.data(), N, C, OC);
  reference::matmul_forward(ref_y.data(), inp.data(), w.data(), b.data(), N, C, OC);
  expect_near_all(y, ref_y, 1e-4, "matmul out");
  const auto dy = random_vector(N * OC, 7);
  std::vector<float> dx(N * C), dw(C * OC, 1.0f), db(OC, 1.0f);
  auto ref_dx = dx, ref_dw = dw, ref_db = db;
  cpu::matmul_backward(dx.data(), dw.data(), db.data(), dy.data(), inp.data(), w.data(), N, C, OC);
  reference::matmul_backward(ref_dx.data(), ref_dw.data(), ref_db.data(), dy.data(), inp.data(),
                             w.data(), N, C, OC);
  expect_near_all(dx, ref_dx, 1e-4, "matmul dinp");
  expect_near_all(dw, ref_dw, 1e-4, "matmul dweight");
  expect_near_all(db, ref_db, 1e-4, "matmul dbias");

  const auto x = random_vector(N * C, 8, 3.0);
  std::vector<float> g(N * C), ref_g(N * C), dg(N * C), ref_dg(N * C);
  cpu::gelu_forward(g.data(), x.data(), N * C);
  reference::gelu_forward(ref_g.data(), x.data(), N * C);
  expect_near_all(g, ref_g, 1e-6, "gelu out");
  cpu::gelu_backward(dg.data(), x.data(), dout.data(), N * C);
  reference::gelu_backward(ref_dg.data(), x.data(), dout.data(), N * C);
  expect_near_all(dg, ref_dg, 1e-5, "gelu dinp");

  for (float p : {0.0f, 0.25f}) {
    const DropoutSite dropout = make_dropout(p);
    std::vector<float> r(N * C), ref_r(N * C), dr(N * C), ref_dr(N * C);
    cpu::residual_dropout_forward(r.data(), inp.data(), x.data(), B, T, C, dropout);
    reference::residual_dropout_forward(ref_r.data(), inp.data(), x.data(), B, T, C, dropout);
    expect_near_all(r, ref_r, 1e-6, "residual dropout out");
    cpu::dropout_backward(dr.data(), dout.data(), B, T, C, dropout);
    reference::dropout_backward(ref_dr.data(), dout.data(), B, T, C, dropout);
    expect_near_all(dr, ref_dr, 1e-6, "dropout dinp");
  }
}

TEST_P(KernelsAgainstReference, EncoderAttentionCrossEntropy) {
  const auto [B, T, C, NH] = GetParam();
  const std::int64_t N = B * T, V = 37, Vp = 128;
  for (float p : {0.0f, 0.2f}) {
    const DropoutSite dropout = make_dropout(p);
    const auto tokens = random_tokens(N, static_cast<int>(V), 9);
    const auto wte = random_vector(V * C, 10), wpe = random_vector(T * C, 11);
    std::vector<float> enc(N * C), ref_enc(N * C);
    cpu::encoder_forward(enc.data(), tokens.data(), wte.data(), wpe.data(), B, T, C, dropout);
    reference::encoder_forward(ref_enc.data(), tokens.data(), wte.data(), wpe.data(), B, T, C,
                               dropout);
    expect_near_all(enc, ref_enc, 1e-6, "encoder out");
    const auto denc = random_vector(N * C, 12);
    std::vector<float> dwte(V * C, 0.5f), dwpe(T * C, 0.5f);
    auto ref_dwte = dwte, ref_dwpe = dwpe;
    cpu::encoder_backward(dwte.data(), dwpe.data(), denc.data(), tokens.data(), B, T, C, dropout);
    reference::encoder_backward(ref_dwte.data(), ref_dwpe.data(), denc.data(), tokens.data(), B, T,
                                C, dropout);
    expect_near_all(dwte, ref_dwte, 1e-5, "encoder dwte");
    expect_near_all(dwpe, ref_dwpe, 1e-5, "encoder dwpe");

    const auto qkv = random_vector(N * 3 * C, 13);
    std::vector<float> att(B * NH * T * T), ref_att(B * NH * T * T), y(N * C), ref_y(N * C);
    cpu::attention_forward(y.data(), att.data(), qkv.data(), B, T, C, NH, dropout);
    reference::attention_forward(ref_y.data(), ref_att.data(), qkv.data(), B, T, C, NH, dropout);
    expect_near_all(att, ref_att, 1e-5, "attention att");
    expect_near_all(y, ref_y, 1e-5, "attention out");
    const auto dy = random_vector(N * C, 14);
    std::vector<float> dqkv(N * 3 * C, 9.0f), ref_dqkv(N * 3 * C), datt(B * NH * T * T),
        ref_datt(B * NH * T * T);
    cpu::attention_backward(dqkv.data(), datt.data(), dy.data(), qkv.data(), att.data(), B, T, C,
                            NH, dropout);
    reference::attention_backward(ref_dqkv.data(), ref_datt.data(), dy.data(), qkv.data(),
                                  ref_att.data(), B, T, C, NH, dropout);
    expect_near_all(dqkv, ref_dqkv, 1e-4, "attention dqkv");
  }

  auto logits = random_vector(N * Vp, 15, 2.0);
  auto targets = random_tokens(N, static_cast<int>(V), 16);
  targets[0] = -100;
  auto ref_logits = logits;
  std::vector<float> losses(N), lse(N), ref_losses(N), ref_lse(N);
  const auto counted =
      cpu::crossentropy_forward(losses.data(), lse.data(), logits.data(), targets.data(), N, V, Vp);
  const auto ref_counted = reference::crossentropy_forward(
      ref_losses.data(), ref_lse.data(), ref_logits.data(), targets.data(), N, V, Vp);
  EXPECT_EQ(counted, ref_counted);
  EXPECT_EQ(counted, N - 1);
  expect_near_all(losses, ref_losses, 1e-5, "cross-entropy losses");
  cpu::crossentropy_backward(logits.data(), lse.data(), targets.data(), N, V, Vp, 0.5f);
  reference::crossentropy_backward(ref_logits.data(), ref_lse.data(), targets.data(), N, V, Vp,
                                   0.5f);
  expect_near_all(logits, ref_logits, 1e-6, "cross-entropy dlogits");
}

INSTANTIATE_TEST_SUITE_P(Sizes, KernelsAgainstReference,
                         ::testing::Values(Shape{1, 1, 4, 1}, Shape{2, 22, 24, 3},
                                           Shape{1, 5, 1023, 3}, Shape{3, 17, 64, 4}));

// The log-sum-exp attention (flash_attention_*) against the scalar twins: out and dqkv as the
// probabilities' kernels give them, lse as attention_logsumexp, with and without dropout. T = 1,
// T within one block of 64 query rows, exactly one, one past it and three with a partial last;
// head sizes 4, 8, 16, 6 and 7 (odd).
TEST(FlashAttention, MatchesTheReferenceKernels) {
  for (const Shape& shape : {Shape{1, 1, 4, 1}, Shape{2, 22, 24, 3}, Shape{2, 64, 64, 4},
                             Shape{1, 65, 21, 3}, Shape{1, 130, 12, 2}}) {
    const auto [B, T, C, NH] = shape;
    const std::int64_t N = B * T;
    for (float p : {0.0f, 0.2f}) {
      SCOPED_TRACE(::testing::Message()
                   << "B " << B << " T " << T << " C " << C << " NH " << NH << " dropout " << p);
      const DropoutSite dropout = make_dropout(p);
      const auto qkv = random_vector(N * 3 * C, 30, 2.0), dy = random_vector(N * C, 31);
      std::vector<float> y(N * C), lse(B * NH * T), ref_y(N * C), ref_att(B * NH * T * T),
          ref_lse(B * NH * T);
      cpu::flash_attention_forward(y.data(), lse.data(), qkv.data(), B, T, C, NH, dropout);
      reference::attention_forward(ref_y.data(), ref_att.data(), qkv.data(), B, T, C, NH, dropout);
      reference::attention_logsumexp(ref_lse.data(), qkv.data(), B, T, C, NH);
      expect_near_all(y, ref_y, 1e-5, "flash attention out");
      expect_near_all(lse, ref_lse, 1e-5, "flash attention lse");
      std::vector<float> dqkv(N * 3 * C, 9.0f), ref_dqkv(N * 3 * C), ref_datt(B * NH * T * T);
      cpu::flash_attention_backward(dqkv.data(), dy.data(), qkv.data(), lse.data(), B, T, C, NH,
                                    dropout);
      reference::attention_backward(ref_dqkv.data(), ref_datt.data(), dy.data(), qkv.data(),
                                    ref_att.data(), B, T, C, NH, dropout);
      expect_near_all(dqkv, ref_dqkv, 1e-4, "flash attention dqkv");
    }
  }
}

TEST(Gemm, AllTransposeCombinationsWithStridesAndBeta) {
  const std::int64_t M = 5, N = 7, K = 3, ld = 11;
  const auto a = random_vector(ld * ld, 20), b = random_vector(ld * ld, 21);
  for (bool trans_a : {false, true})
    for (bool trans_b : {false, true}) {
      std::vector<float> c(M * ld, 1.0f);
      cpu::gemm(trans_a, trans_b, M, N, K, 2.0f, a.data(), ld, b.data(), ld, 0.5f, c.data(), ld);
      for (std::int64_t i = 0; i < M; ++i)
        for (std::int64_t j = 0; j < N; ++j) {
          double sum = 0;
          for (std::int64_t k = 0; k < K; ++k)
            sum += (trans_a ? a[k * ld + i] : a[i * ld + k]) *
                   (trans_b ? b[j * ld + k] : b[k * ld + j]);
          EXPECT_NEAR(c[i * ld + j], 2.0 * sum + 0.5, 1e-5)
              << trans_a << trans_b << " " << i << "," << j;
        }
    }
  EXPECT_FALSE(cpu::gemm_backend().empty());
}

TEST(FiniteDifferences, LayerNorm) {
  const std::int64_t N = 3, C = 5;
  auto x = random_vector<double>(N * C, 30), w = random_vector<double>(C, 31),
       b = random_vector<double>(C, 32);
  const auto probe = random_vector<double>(N * C, 33);
  std::vector<double> out(N * C), mean(N), rstd(N);
  auto loss = [&] {
    reference::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(),
                                 N, C, 1e-5);
    return dot(out, probe);
  };
  loss();
  std::vector<double> dx(N * C, 0.0), dw(C, 0.0), db(C, 0.0);
  reference::layernorm_backward(dx.data(), dw.data(), db.data(), probe.data(), x.data(), w.data(),
                                mean.data(), rstd.data(), N, C);
  check_gradient(x, dx, loss, "layernorm dinp");
  check_gradient(w, dw, loss, "layernorm dweight");
  check_gradient(b, db, loss, "layernorm dbias");
}

TEST(FiniteDifferences, Matmul) {
  const std::int64_t N = 4, C = 3, OC = 5;
  auto x = random_vector<double>(N * C, 40), w = random_vector<double>(C * OC, 41),
       b = random_vector<double>(OC, 42);
  const auto probe = random_vector<double>(N * OC, 43);
  std::vector<double> out(N * OC);
  auto loss = [&] {
    reference::matmul_forward(out.data(), x.data(), w.data(), b.data(), N, C, OC);
    return dot(out, probe);
  };
  std::vector<double> dx(N * C), dw(C * OC, 0.0), db(OC, 0.0);
  reference::matmul_backward(dx.data(), dw.data(), db.data(), probe.data(), x.data(), w.data(), N,
                             C, OC);
  check_gradient(x, dx, loss, "matmul dinp");
  check_gradient(w, dw, loss, "matmul dweight");
  check_gradient(b, db, loss, "matmul dbias");
}

TEST(FiniteDifferences, AttentionWithAndWithoutDropout) {
  const std::int64_t B = 2, T = 4, C = 6, NH = 2;
  for (float p : {0.0f, 0.3f}) {
    const DropoutSite dropout = make_dropout(p);
    auto qkv = random_vector<double>(B * T * 3 * C, 50);
    const auto probe = random_vector<double>(B * T * C, 51);
    std::vector<double> out(B * T * C), att(B * NH * T * T), datt(B * NH * T * T),
        dqkv(B * T * 3 * C);
    auto loss = [&] {
      reference::attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH, dropout);
      return dot(out, probe);
    };
    loss();
    reference::attention_backward(dqkv.data(), datt.data(), probe.data(), qkv.data(), att.data(), B,
                                  T, C, NH, dropout);
    check_gradient(qkv, dqkv, loss, p > 0 ? "attention (dropout) dqkv" : "attention dqkv");
  }
}

TEST(FiniteDifferences, GeluEncoderResidualCrossEntropy) {
  const std::int64_t n = 9;
  auto x = random_vector<double>(n, 60, 2.0);
  const auto probe = random_vector<double>(n, 61);
  std::vector<double> out(n), dx(n);
  auto gelu_loss = [&] {
    reference::gelu_forward(out.data(), x.data(), n);
    return dot(out, probe);
  };
  reference::gelu_backward(dx.data(), x.data(), probe.data(), n);
  check_gradient(x, dx, gelu_loss, "gelu dinp");

  const std::int64_t B = 2, T = 3, C = 4, V = 5;
  const DropoutSite dropout = make_dropout(0.25f);
  const std::vector<int> tokens = {0, 3, 3, 1, 4, 0};
  auto wte = random_vector<double>(V * C, 62), wpe = random_vector<double>(T * C, 63);
  const auto probe2 = random_vector<double>(B * T * C, 64);
  std::vector<double> enc(B * T * C), dwte(V * C, 0.0), dwpe(T * C, 0.0);
  auto encoder_loss = [&] {
    reference::encoder_forward(enc.data(), tokens.data(), wte.data(), wpe.data(), B, T, C, dropout);
    return dot(enc, probe2);
  };
  reference::encoder_backward(dwte.data(), dwpe.data(), probe2.data(), tokens.data(), B, T, C,
                              dropout);
  check_gradient(wte, dwte, encoder_loss, "encoder dwte");
  check_gradient(wpe, dwpe, encoder_loss, "encoder dwpe");

  auto residual_input = random_vector<double>(B * T * C, 65);
  const auto residual = random_vector<double>(B * T * C, 66);
  std::vector<double> r(B * T * C), dr(B * T * C);
  auto residual_loss = [&] {
    reference::residual_dropout_forward(r.data(), residual.data(), residual_input.data(), B, T, C,
                                        dropout);
    return dot(r, probe2);
  };
  reference::dropout_backward(dr.data(), probe2.data(), B, T, C, dropout);
  check_gradient(residual_input, dr, residual_loss, "residual dropout dinp");

  const std::int64_t N = 4, Vp = 8;
  auto logits = random_vector<double>(N * Vp, 67);
  const std::vector<int> targets = {1, -100, 4, 0};
  std::vector<double> losses(N), lse(N);
  auto ce_loss = [&] {
    reference::crossentropy_forward(losses.data(), lse.data(), logits.data(), targets.data(), N, V,
                                    Vp);
    double sum = 0;
    for (double l : losses) sum += l;
    return sum / 3.0;
  };
  ce_loss();
  std::vector<double> dlogits = logits;
  reference::crossentropy_backward(dlogits.data(), lse.data(), targets.data(), N, V, Vp, 1.0 / 3.0);
  check_gradient(logits, dlogits, ce_loss, "cross-entropy dlogits");
}

}  // namespace
}  // namespace zero::gpt2
