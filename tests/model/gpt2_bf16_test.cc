// 16-bit GPT-2 on CPU: gemm_bf16 (oneDNN or widened) and gemm_widen_b against a scalar fp32
// reference at odd sizes, the conversions, and GPT2Compute with bf16/fp16 parameters and
// gradients against the fp32 path (forward, backward, and a few SGD steps tracking fp32).
//
// Tolerances. GEMM: bf16 × bf16 products are exact in fp32, so only the fp32 summation order
// differs from the double reference: |error| <= 1e-5 · Σ|a·b| (+1e-6). fp16 weights widen
// exactly, same bound. Model (tiny GPT-2, 2 blocks): every GEMM input is rounded to bf16 (relative
// 2^-9) or fp16 (2^-12). Measured here: loss within 1.8e-5 (bf16) / 1e-6 (fp16) relative, worst
// per-unit gradient error ‖g16 - g32‖ / ‖g32‖ 3.3e-3 (bf16) / 3.6e-4 (fp16); the bounds are
// about 3-10x that (loss 2e-4 / 2e-5, gradients 1e-2 / 1.5e-3), and 10x the loss bound over 8
// SGD steps (errors compound through the weights).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include "../common/measured.h"
#include "../common/random_inputs.h"
#include "../common/tiny_gpt2.h"
#include "zero/core/allocator.h"
#include "zero/core/device_context.h"
#include "zero/core/dtype.h"
#include "zero/core/error.h"
#include "zero/core/memory_ledger.h"
#include "zero/gpt2/layers_cpu.h"
#include "zero/gpt2/model.h"

namespace zero::gpt2 {
namespace {

using testing::random_vector;

std::vector<BFloat16> to_bf16_vector(const std::vector<float>& values) {
  std::vector<BFloat16> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = to_bf16(values[i]);
  return out;
}

// C = op(A) · op(B) + beta · C in double, A and B given as fp32 values.
void reference_gemm(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K,
                    const std::vector<float>& A, const std::vector<float>& B, float beta,
                    std::vector<float>& C, std::vector<double>& magnitude) {
  magnitude.assign(M * N, 0.0);
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      double sum = beta * double(C[i * N + j]), size = std::abs(sum);
      for (std::int64_t k = 0; k < K; ++k) {
        const double a = ta ? A[k * M + i] : A[i * K + k];
        const double b = tb ? B[j * K + k] : B[k * N + j];
        sum += a * b;
        size += std::abs(a * b);
      }
      C[i * N + j] = static_cast<float>(sum);
      magnitude[i * N + j] = size;
    }
}

struct GemmShape {
  std::int64_t M, N, K;
};
class Gemm16 : public ::testing::TestWithParam<GemmShape> {};

TEST_P(Gemm16, Bf16MatchesScalarReferenceForEveryTransposeAndBeta) {
  const auto [M, N, K] = GetParam();
  for (int trans = 0; trans < 4; ++trans)
    for (float beta : {0.0f, 1.0f}) {
      const bool ta = trans & 1, tb = trans & 2;
      // Values exactly representable in bf16, so the reference sees what the kernel sees.
      std::vector<float> a = random_vector(M * K, 1 + trans), b = random_vector(K * N, 7 + trans);
      for (float& v : a) v = to_float(to_bf16(v));
      for (float& v : b) v = to_float(to_bf16(v));
      const auto a16 = to_bf16_vector(a), b16 = to_bf16_vector(b);
      std::vector<float> c = random_vector(M * N, 11), expected = c;
      std::vector<double> magnitude;
      reference_gemm(ta, tb, M, N, K, a, b, beta, expected, magnitude);
      cpu::gemm_bf16(ta, tb, M, N, K, a16.data(), ta ? M : K, b16.data(), tb ? K : N, beta,
                     c.data(), N);
      for (std::int64_t i = 0; i < M * N; ++i)
        ASSERT_NEAR(c[i], expected[i], 1e-5 * magnitude[i] + 1e-6)
            << "M=" << M << " N=" << N << " K=" << K << " ta=" << ta << " tb=" << tb
            << " beta=" << beta << " element " << i << " (" << cpu::gemm_bf16_backend() << ")";
    }
}

TEST_P(Gemm16, WidenedBf16AndFp16WeightsMatchScalarReference) {
  const auto [M, N, K] = GetParam();
  for (DType dtype : {DType::kBFloat16, DType::kFloat16})
    for (int tb = 0; tb < 2; ++tb)
      for (float beta : {0.0f, 1.0f}) {
        const std::vector<float> a = random_vector(M * K, 3);
        std::vector<float> b = random_vector(K * N, 5);
        std::vector<std::uint16_t> b16(b.size());
        convert(b.data(), DType::kFloat32, b16.data(), dtype, b.size());
        convert(b16.data(), dtype, b.data(), DType::kFloat32, b.size());
        std::vector<float> c = random_vector(M * N, 13), expected = c;
        std::vector<double> magnitude;
        reference_gemm(false, tb, M, N, K, a, b, beta, expected, magnitude);
        cpu::gemm_widen_b(false, tb, M, N, K, a.data(), K, b16.data(), dtype, tb ? K : N, beta,
                          c.data(), N);
        for (std::int64_t i = 0; i < M * N; ++i)
          ASSERT_NEAR(c[i], expected[i], 1e-5 * magnitude[i] + 1e-6)
              << name_of(dtype) << " M=" << M << " N=" << N << " K=" << K << " tb=" << tb;
      }
}

INSTANTIATE_TEST_SUITE_P(OddSizes, Gemm16,
                         ::testing::Values(GemmShape{1, 1, 1}, GemmShape{22, 1, 1023},
                                           GemmShape{1, 1023, 22}, GemmShape{1023, 22, 1},
                                           GemmShape{22, 1023, 22}, GemmShape{37, 22, 1023}));

// Ranks of a thread communicator call the same GEMM at once: each result equals the lone call's.
TEST(Gemm16Threads, ConcurrentCallsOfOneShapeGiveTheLoneResult) {
  const std::int64_t M = 64, N = 96, K = 200;
  const auto a = to_bf16_vector(random_vector(M * K, 21)),
             b = to_bf16_vector(random_vector(K * N, 23));
  std::vector<float> lone(M * N);
  cpu::gemm_bf16(false, true, M, N, K, a.data(), K, b.data(), K, 0.0f, lone.data(), N);
  std::vector<std::vector<float>> results(4, std::vector<float>(M * N));
  std::vector<std::thread> threads;
  for (auto& result : results)
    threads.emplace_back([&] {
      for (int repeat = 0; repeat < 20; ++repeat)
        cpu::gemm_bf16(false, true, M, N, K, a.data(), K, b.data(), K, 0.0f, result.data(), N);
    });
  for (auto& thread : threads) thread.join();
  for (const auto& result : results) EXPECT_EQ(result, lone);
}

TEST(Gemm16Errors, BetaOtherThanZeroOrOneIsRefused) {
  std::vector<BFloat16> a(4), b(4);
  std::vector<float> c(4);
  EXPECT_THROW(cpu::gemm_bf16(false, false, 2, 2, 2, a.data(), 2, b.data(), 2, 0.5f, c.data(), 2),
               Error);
}

// The CPU attention with its products on the bf16 GEMM (FlashAttentionScratch::bf16) against the
// fp32 one: out, lse and dqkv within a bound of about 3x the largest difference measured, each
// relative to the fp32 result's largest magnitude (q, k, v, dout and the probabilities rounded
// to 2^-9). Shapes: GPT-2's heads of 64 at T 256 (four blocks of 64 query rows) and heads of 6 at
// T 130 (a partial third block), with and without dropout.
TEST(Attention16, Bf16ProductsTrackTheFp32Attention) {
  struct Case {
    std::int64_t B, T, C, NH;
    float dropout;
    double bound_out, bound_lse, bound_dqkv;
  };
  for (const Case& c : {Case{2, 256, 768, 12, 0.0f, 1.2e-2, 4e-3, 1.5e-2},
                        Case{1, 130, 18, 3, 0.2f, 1.2e-2, 4e-3, 1.5e-2}}) {
    SCOPED_TRACE(::testing::Message() << "T " << c.T << " C " << c.C << " NH " << c.NH);
    const std::int64_t N = c.B * c.T;
    DropoutSite dropout;
    dropout.probability = c.dropout;
    dropout.key = derive_key(42, 7);
    const auto qkv = random_vector(N * 3 * c.C, 30), dy = random_vector(N * c.C, 31);
    std::vector<float> y32(N * c.C), lse32(c.B * c.NH * c.T), dqkv32(N * 3 * c.C);
    std::vector<float> y16(y32.size()), lse16(lse32.size()), dqkv16(dqkv32.size());
    cpu::flash_attention_forward(y32.data(), lse32.data(), qkv.data(), c.B, c.T, c.C, c.NH,
                                 dropout);
    cpu::flash_attention_backward(dqkv32.data(), dy.data(), qkv.data(), lse32.data(), c.B, c.T, c.C,
                                  c.NH, dropout);
    cpu::FlashAttentionScratch bf16;
    bf16.bf16 = true;
    cpu::flash_attention_forward(y16.data(), lse16.data(), qkv.data(), c.B, c.T, c.C, c.NH, dropout,
                                 bf16);
    cpu::flash_attention_backward(dqkv16.data(), dy.data(), qkv.data(), lse16.data(), c.B, c.T, c.C,
                                  c.NH, dropout, bf16);
    auto relative = [](const std::vector<float>& got, const std::vector<float>& want) {
      double difference = 0, magnitude = 0;
      for (std::size_t i = 0; i < want.size(); ++i) {
        difference = std::max(difference, double(std::abs(got[i] - want[i])));
        magnitude = std::max(magnitude, double(std::abs(want[i])));
      }
      return difference / magnitude;
    };
    const double out = relative(y16, y32), lse = relative(lse16, lse32);
    const double dqkv = relative(dqkv16, dqkv32);
    zero::testing::print_measured("out T " + std::to_string(c.T), out, c.bound_out);
    zero::testing::print_measured("lse T " + std::to_string(c.T), lse, c.bound_lse);
    zero::testing::print_measured("dqkv T " + std::to_string(c.T), dqkv, c.bound_dqkv);
    EXPECT_LE(out, c.bound_out);
    EXPECT_LE(lse, c.bound_lse);
    EXPECT_LE(dqkv, c.bound_dqkv);
    EXPECT_GT(out, 0.0) << "the bf16 products were not taken";
  }
}

// The attention's per-thread blocks given by the caller (GPT2Compute's planned workspace, at any
// alignment), room for one thread or for all, give the results of the kernels' own allocation bit
// for bit; blocks too small for one thread are refused.
TEST(Attention16, CallersBlocksGiveTheOwnAllocationsResultsAtAnyThreadCount) {
  const std::int64_t B = 2, T = 100, C = 32, NH = 2, N = B * T;
  const auto qkv = random_vector(N * 3 * C, 40), dy = random_vector(N * C, 41);
  for (bool bf16 : {false, true}) {
    SCOPED_TRACE(bf16 ? "bf16 products" : "fp32 products");
    cpu::FlashAttentionScratch own;
    own.bf16 = bf16;
    std::vector<float> y(N * C), lse(B * NH * T), dqkv(N * 3 * C);
    cpu::flash_attention_forward(y.data(), lse.data(), qkv.data(), B, T, C, NH, {}, own);
    cpu::flash_attention_backward(dqkv.data(), dy.data(), qkv.data(), lse.data(), B, T, C, NH, {},
                                  own);
    for (std::int64_t threads : {1, 4}) {
      const std::int64_t bytes = cpu::flash_attention_blocks_bytes(T, bf16, threads);
      std::vector<char> blocks(bytes + 3);
      std::vector<BFloat16> staged_qkv(N * 3 * C), staged_dout(N * C);
      cpu::FlashAttentionScratch given = own;
      given.blocks = blocks.data() + 3;  // off any alignment
      given.blocks_bytes = bytes;
      given.staged_qkv = staged_qkv.data();
      given.staged_dout = staged_dout.data();
      std::vector<float> y2(y.size()), lse2(lse.size()), dqkv2(dqkv.size());
      cpu::flash_attention_forward(y2.data(), lse2.data(), qkv.data(), B, T, C, NH, {}, given);
      cpu::flash_attention_backward(dqkv2.data(), dy.data(), qkv.data(), lse2.data(), B, T, C, NH,
                                    {}, given);
      EXPECT_EQ(y2, y) << threads << " threads";
      EXPECT_EQ(lse2, lse) << threads << " threads";
      EXPECT_EQ(dqkv2, dqkv) << threads << " threads";
      if (bf16) {
        EXPECT_EQ(to_float(staged_qkv[5]), to_float(to_bf16(qkv[5])));
      }
    }
    std::vector<char> small(cpu::flash_attention_blocks_bytes(T, bf16, 1) - 1);
    cpu::FlashAttentionScratch too_small = own;
    too_small.blocks = small.data();
    too_small.blocks_bytes = static_cast<std::int64_t>(small.size());
    EXPECT_THROW(
        cpu::flash_attention_forward(y.data(), lse.data(), qkv.data(), B, T, C, NH, {}, too_small),
        Error);
  }
}

TEST(Convert16, MatchesLibraryConversionsAndAccumulatesWithOneRounding) {
  const std::vector<float> values = random_vector(40000, 17);
  std::vector<BFloat16> bulk(values.size());
  cpu::to_bf16(bulk.data(), values.data(), std::int64_t(values.size()));
  for (std::size_t i = 0; i < values.size(); ++i)
    ASSERT_EQ(bulk[i].bits, to_bf16(values[i]).bits) << i;
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    std::vector<std::uint16_t> stored(values.size());
    convert(values.data(), DType::kFloat32, stored.data(), dtype, values.size());
    std::vector<float> widened(values.size()), expected(values.size());
    cpu::widen(widened.data(), stored.data(), dtype, std::int64_t(values.size()));
    convert(stored.data(), dtype, expected.data(), DType::kFloat32, values.size());
    EXPECT_EQ(widened, expected) << name_of(dtype);
    const std::vector<float> addend = random_vector(values.size(), 19);
    std::vector<std::uint16_t> sum = stored;
    cpu::accumulate(sum.data(), dtype, addend.data(), std::int64_t(values.size()));
    for (std::size_t i = 0; i < values.size(); ++i) {
      const float exact = expected[i] + addend[i];
      std::uint16_t rounded;
      convert(&exact, DType::kFloat32, &rounded, dtype, 1);
      ASSERT_EQ(sum[i], rounded) << name_of(dtype) << " element " << i;
    }
  }
}

// Units in one dtype (params) and gradients in another, driven as the engine does.
struct Units16 {
  std::vector<std::vector<std::uint16_t>> params, grads16;
  std::vector<std::vector<float>> grads32;
  DType param_dtype, grad_dtype;
  Units16(const GPT2Model& model, DType params_in, DType grads_in)
      : param_dtype(params_in), grad_dtype(grads_in) {
    for (int unit = 0; unit < model.num_units(); ++unit) {
      const std::size_t count = model.params(unit).layout().padded_num_elements();
      params.emplace_back(count);
      grads16.emplace_back(count);
      grads32.emplace_back(count);
    }
    load(model);
  }
  void load(const GPT2Model& model) {
    for (int unit = 0; unit < model.num_units(); ++unit)
      convert(model.param_data(unit), DType::kFloat32, params[unit].data(), param_dtype,
              params[unit].size());
  }
  ConstUnitData p(int unit) const { return {params[unit].data(), param_dtype}; }
  UnitData g(int unit) {
    if (grad_dtype == DType::kFloat32) return grads32[unit].data();
    return {grads16[unit].data(), grad_dtype};
  }
  std::vector<float> grad(int unit) const {
    if (grad_dtype == DType::kFloat32) return grads32[unit];
    std::vector<float> out(grads16[unit].size());
    convert(grads16[unit].data(), grad_dtype, out.data(), DType::kFloat32, out.size());
    return out;
  }
  float step(GPT2Compute& compute, const GPT2Config& config, const std::vector<int>& tokens,
             const std::vector<int>& targets) {
    for (auto& g : grads16) std::fill(g.begin(), g.end(), std::uint16_t{0});
    for (auto& g : grads32) std::fill(g.begin(), g.end(), 0.0f);
    const int emb = embeddings_unit(), norm = final_norm_unit(config), head = head_unit(config);
    compute.set_inputs(tokens, targets);
    compute.forward_embeddings(p(emb));
    for (int l = 0; l < config.n_layer; ++l) compute.forward_block(l, p(block_unit(l)));
    compute.forward_head(p(norm), p(head));
    compute.backward_head(p(norm), p(head), g(norm), g(head));
    for (int l = config.n_layer - 1; l >= 0; --l)
      compute.backward_block(l, p(block_unit(l)), g(block_unit(l)));
    compute.backward_embeddings(p(emb), g(emb));
    return compute.loss();
  }
};

double relative_error(const std::vector<float>& actual, const float* expected) {
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    diff += (double(actual[i]) - expected[i]) * (double(actual[i]) - expected[i]);
    norm += double(expected[i]) * expected[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

struct Precision {
  DType params, grads;
  bool checkpointing;
  double loss_tolerance, grad_tolerance;
  bool llama = false;  // tiny_llama_config (GQA, RoPE, SwiGLU, untied) instead of GPT-2
};
GPT2Config config_of(const Precision& precision) {
  return precision.llama ? tiny_llama_config() : tiny_config();
}
class Compute16 : public ::testing::TestWithParam<Precision> {
 protected:
  MemoryLedger ledger_;
  HostAllocator allocator_{ledger_};
  std::unique_ptr<DeviceContext> context_ = make_cpu_context();
};

TEST_P(Compute16, ForwardAndBackwardTrackTheFp32Path) {
  const Precision precision = GetParam();
  const GPT2Config config = config_of(precision);
  GPT2Model model(config, allocator_);
  model.init(3);
  const std::int64_t B = 3, T = 11;
  const auto tokens = sequence(B * T, 53, 1), targets = sequence(B * T, 53, 2);
  GPT2Compute compute32(config, B, T, *context_, allocator_);
  model.zero_grads();
  const float loss32 = model.forward(compute32, tokens, targets);
  model.backward(compute32);

  Units16 units(model, precision.params, precision.grads);
  GPT2Compute compute16(
      config, B, T, *context_, allocator_,
      {.activation_checkpointing = precision.checkpointing, .param_dtype = precision.params});
  const float loss16 = units.step(compute16, config, tokens, targets);
  EXPECT_NEAR(loss16, loss32, precision.loss_tolerance * loss32);
  EXPECT_NE(loss16, loss32);  // the 16-bit path really ran in 16 bits
  double worst = 0.0;
  for (int unit = 0; unit < model.num_units(); ++unit) {
    const double error = relative_error(units.grad(unit), model.grad_data(unit));
    EXPECT_LT(error, precision.grad_tolerance) << "unit " << unit;
    worst = std::max(worst, error);
  }
  std::printf(
      "%s params, %s grads: loss %.6f vs fp32 %.6f (relative %.2e), worst unit gradient "
      "error %.2e\n",
      name_of(precision.params).data(), name_of(precision.grads).data(), loss16, loss32,
      std::abs(loss16 - loss32) / loss32, worst);
}

TEST_P(Compute16, SgdStepsTrackTheFp32Run) {
  const Precision precision = GetParam();
  const GPT2Config config = config_of(precision);
  GPT2Model reference(config, allocator_), master(config, allocator_);
  reference.init(4);
  master.init(4);
  const std::int64_t B = 2, T = 12;
  const auto tokens = sequence(B * T, 53, 3), targets = sequence(B * T, 53, 4);
  GPT2Compute compute32(config, B, T, *context_, allocator_);
  GPT2Compute compute16(
      config, B, T, *context_, allocator_,
      {.activation_checkpointing = precision.checkpointing, .param_dtype = precision.params});
  Units16 units(master, precision.params, precision.grads);
  constexpr float kLearningRate = 0.1f;
  float first = 0.0f, last32 = 0.0f;
  double worst = 0.0;
  for (int step = 0; step < 8; ++step) {
    reference.zero_grads();
    const float loss32 = reference.forward(compute32, tokens, targets);
    reference.backward(compute32);
    units.load(master);  // fp32 master weights rounded to the 16-bit working copy
    const float loss16 = units.step(compute16, config, tokens, targets);
    EXPECT_NEAR(loss16, loss32, 10 * precision.loss_tolerance * loss32) << "step " << step;
    worst = std::max(worst, double(std::abs(loss16 - loss32) / loss32));
    for (int unit = 0; unit < reference.num_units(); ++unit) {
      float* p32 = reference.param_data(unit);
      const float* g32 = reference.grad_data(unit);
      float* p_master = master.param_data(unit);
      const std::vector<float> g16 = units.grad(unit);
      for (std::size_t i = 0; i < g16.size(); ++i) {
        p32[i] -= kLearningRate * g32[i];
        p_master[i] -= kLearningRate * g16[i];
      }
    }
    if (step == 0) first = loss32;
    last32 = loss32;
  }
  EXPECT_LT(last32, 0.9f * first);  // the runs being tracked do learn
  std::printf("%s params, %s grads: 8 SGD steps, loss %.4f -> %.4f, worst relative loss gap %.2e\n",
              name_of(precision.params).data(), name_of(precision.grads).data(), first, last32,
              worst);
}

INSTANTIATE_TEST_SUITE_P(
    Precisions, Compute16,
    ::testing::Values(Precision{DType::kBFloat16, DType::kFloat32, false, 2e-4, 1e-2},
                      Precision{DType::kBFloat16, DType::kBFloat16, false, 2e-4, 1e-2},
                      Precision{DType::kBFloat16, DType::kBFloat16, true, 2e-4, 1e-2},
                      Precision{DType::kFloat16, DType::kFloat32, false, 2e-5, 1.5e-3},
                      Precision{DType::kFloat16, DType::kFloat16, true, 2e-5, 1.5e-3},
                      Precision{DType::kBFloat16, DType::kFloat32, false, 2e-4, 1e-2, true},
                      Precision{DType::kBFloat16, DType::kBFloat16, true, 2e-4, 1e-2, true},
                      Precision{DType::kFloat16, DType::kFloat16, true, 2e-5, 1.5e-3, true}));

TEST(Compute16Errors, DtypesOtherThanTheConfiguredOnesAreRefused) {
  MemoryLedger ledger;
  HostAllocator allocator(ledger);
  const std::unique_ptr<zero::DeviceContext> context = zero::make_cpu_context();
  const GPT2Config config = tiny_config();
  GPT2Model model(config, allocator);
  GPT2Compute compute(config, 1, 4, *context, allocator, {.param_dtype = DType::kBFloat16});
  compute.set_inputs(sequence(4, 53, 1), sequence(4, 53, 2));
  // fp32 parameters into a bf16 compute.
  EXPECT_THROW(compute.forward_embeddings(model.param_data(embeddings_unit())), Error);
  // fp16 gradients for bf16 parameters.
  Units16 units(model, DType::kBFloat16, DType::kFloat16);
  compute.forward_embeddings(units.p(embeddings_unit()));
  for (int l = 0; l < config.n_layer; ++l) compute.forward_block(l, units.p(block_unit(l)));
  compute.forward_head(units.p(final_norm_unit(config)), units.p(embeddings_unit()));
  EXPECT_THROW(compute.backward_head(units.p(final_norm_unit(config)), units.p(embeddings_unit()),
                                     units.g(final_norm_unit(config)), units.g(embeddings_unit())),
               Error);
}

}  // namespace
}  // namespace zero::gpt2
