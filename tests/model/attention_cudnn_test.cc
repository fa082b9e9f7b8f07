// cuDNN's fused SDPA (model/gpt2/src/cuda/attention_cudnn.h) through the model's kernel seam
// (Kernels::attention_forward/backward with bf16 precision on the CUDA context) against the CPU
// oracle run in fp32 on the same bf16-rounded q, k, v: out and dqkv within 1e-2 and 2e-2 in
// relative L2 (bf16 inputs, P rounded to bf16 before P·V as FlashAttention does), att the rows'
// log-sum-exp. ZERO_ATTENTION=cudnn makes the kernels refuse, not fall back, so a pass means cuDNN
// ran. Grouped-query attention natively (ZERO_CUDNN_NATIVE_GQA=1) against the default path that
// repeats k and v. Label cuda: skips without a device; skips where the build has no cudnn_frontend
// headers.
#include "attention_cudnn.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "../common/measured.h"
#include "../common/random_inputs.h"
#include "../common/relative_difference.h"
#include "device_array.h"
#include "zero/core/device.h"
#include "zero/core/device_context.h"
#include "zero/core/dtype.h"
#include "zero/core/error.h"
#include "zero/core/memory_ledger.h"
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

std::vector<std::uint16_t> bf16_bits(const std::vector<float>& values) {
  std::vector<std::uint16_t> bits(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) bits[i] = to_bf16(values[i]).bits;
  return bits;
}
std::vector<float> widened(const std::vector<std::uint16_t>& bits) {
  std::vector<float> values(bits.size());
  convert(bits.data(), DType::kBFloat16, values.data(), DType::kFloat32, bits.size());
  return values;
}

// The forward and backward of `kernels` on qkv and out of `io` (attention_io_dtype): fp32 (staged
// to bf16 for cuDNN) or bf16 (read and written in place). Returns out widened and dqkv.
struct AttentionRun {
  std::vector<float> out, dqkv;
};
AttentionRun run_attention(Kernels& kernels, Stream& stream, DType io,
                           const std::vector<float>& qkv, const std::vector<float>& dout,
                           const Shape& s) {
  const std::int64_t N = s.B * s.T, C = s.C;
  DeviceArray<float> qkv32(qkv), out32(static_cast<std::size_t>(N * C)), d_dout(dout),
      att(static_cast<std::size_t>(N * s.NH)), datt(static_cast<std::size_t>(N * s.NH)),
      dqkv(static_cast<std::size_t>(N * 3 * C));
  DeviceArray<std::uint16_t> qkv16(bf16_bits(qkv)), out16(static_cast<std::size_t>(N * C)),
      staged_a(static_cast<std::size_t>(4 * N * C)), staged_b(static_cast<std::size_t>(4 * N * C));
  GemmScratch scratch;
  scratch.staged_a = staged_a.get();
  scratch.staged_b = staged_b.get();
  scratch.staged_a_elements = scratch.staged_b_elements = 4 * N * C;
  const bool bf16 = io == DType::kBFloat16;
  const ActivationOut out = bf16 ? ActivationOut(out16.get(), io) : ActivationOut(out32.get());
  const Activation in = bf16 ? Activation(qkv16.get(), io) : Activation(qkv32.get());
  kernels.attention_forward(stream, out, att.get(), in, s.B, s.T, C, s.NH, DropoutSite{},
                            DType::kBFloat16, scratch);
  kernels.attention_backward(stream, dqkv.get(), datt.get(), d_dout.get(), out, in, att.get(), s.B,
                             s.T, C, s.NH, DropoutSite{}, DType::kBFloat16, scratch);
  return {bf16 ? widened(out16.host()) : out32.host(), dqkv.host()};
}

// bf16 qkv and out (attention_io_dtype: what the GEMM writes and the projection reads) are read and
// written in place: the same bf16 values cuDNN sees and writes as through the fp32 activations'
// staging, so out is that out (its bf16 values widened), dqkv the same up to cuDNN's summation
// order, and both within the oracle's tolerance.
TEST_F(CudnnAttentionTest, ReadsAndWritesBf16ActivationsInPlace) {
  for (const Shape& s : {Shape{2, 37, 128, 2}, Shape{1, 200, 192, 3}}) {
    SCOPED_TRACE(::testing::Message() << "T " << s.T << " C " << s.C << " NH " << s.NH);
    const auto qkv = rounded_to_bf16(testing::random_vector(s.B * s.T * 3 * s.C, 1));
    const auto dout = testing::random_vector(s.B * s.T * s.C, 2);
    Stream& stream = context_->compute_stream();
    const AttentionRun staged = run_attention(*kernels_, stream, DType::kFloat32, qkv, dout, s);
    const AttentionRun in_place = run_attention(*kernels_, stream, DType::kBFloat16, qkv, dout, s);
    EXPECT_LE(zero::testing::relative_difference(in_place.out, staged.out), 1e-6);
    EXPECT_LE(zero::testing::relative_difference(in_place.dqkv, staged.dqkv), 1e-3);
    std::vector<float> out(s.B * s.T * s.C), att(s.B * s.NH * s.T * s.T);
    cpu::attention_forward(out.data(), att.data(), qkv.data(), s.B, s.T, s.C, s.NH, DropoutSite{});
    EXPECT_LE(zero::testing::relative_difference(in_place.out, out), 1e-2);
  }
}

// A bf16 layout the tiled kernels get (ZERO_ATTENTION=tiled after the layout was made, or cuDNN
// refusing the shape on the device) is widened for them and out rounded once: out is the fp32
// kernels' out rounded to bf16, dqkv within bf16 tolerance of the CPU oracle's.
TEST_F(CudnnAttentionTest, TheTiledKernelsTakeBf16ActivationsWidened) {
  setenv("ZERO_ATTENTION", "tiled", 1);
  const std::unique_ptr<Kernels> tiled = make_kernels(*context_);
  const Shape s{2, 37, 128, 2};
  const auto qkv = rounded_to_bf16(testing::random_vector(s.B * s.T * 3 * s.C, 1));
  const auto dout = testing::random_vector(s.B * s.T * s.C, 2);
  Stream& stream = context_->compute_stream();
  const auto workspace = [&] {
    return context_->ledger().entry(MemorySpace::kDevice, MemoryCategory::kWorkspace).current_bytes;
  };
  const std::int64_t workspace_before = workspace();
  const AttentionRun fp32 = run_attention(*tiled, stream, DType::kFloat32, qkv, dout, s);
  const AttentionRun bf16 = run_attention(*tiled, stream, DType::kBFloat16, qkv, dout, s);
  EXPECT_EQ(bf16.out, rounded_to_bf16(fp32.out));
  EXPECT_LE(zero::testing::relative_difference(bf16.dqkv, fp32.dqkv), 2e-2);
  stream.synchronize();
  EXPECT_EQ(workspace(), workspace_before);  // the widened copies went back once the stream ran
}

// One grouped-query attention forward and backward on qkv (N, C + 2·KVH·HS) fp32: natively
// (grouped_attention_*, which must take the call) or with k and v repeated to NH heads
// (repeat_kv_forward, attention_*, repeat_kv_backward). Returns out and dqkv (N, C + 2·KVH·HS).
AttentionRun run_grouped(Kernels& kernels, Stream& stream, bool native,
                         const std::vector<float>& qkv, const std::vector<float>& dout,
                         const Shape& s, std::int64_t KVH) {
  const std::int64_t N = s.B * s.T, C = s.C, HS = C / s.NH, width = C + 2 * KVH * HS;
  DeviceArray<float> d_qkv(qkv), out(static_cast<std::size_t>(N * C)), d_dout(dout),
      att(static_cast<std::size_t>(N * s.NH)), datt(static_cast<std::size_t>(N * s.NH)),
      dqkv(testing::random_vector(N * width, 5)),  // overwritten
      heads(static_cast<std::size_t>(N * 3 * C)), dheads(static_cast<std::size_t>(N * 3 * C));
  DeviceArray<std::uint16_t> staged_a(static_cast<std::size_t>(4 * N * C)),
      staged_b(static_cast<std::size_t>(4 * N * C));
  GemmScratch scratch;
  scratch.staged_a = staged_a.get();
  scratch.staged_b = staged_b.get();
  scratch.staged_a_elements = scratch.staged_b_elements = 4 * N * C;
  if (native) {
    EXPECT_TRUE(kernels.grouped_attention_forward(stream, out.get(), att.get(), d_qkv.get(), s.B,
                                                  s.T, C, s.NH, KVH, DropoutSite{},
                                                  DType::kBFloat16, scratch));
    EXPECT_TRUE(kernels.grouped_attention_backward(stream, dqkv.get(), d_dout.get(), out.get(),
                                                   d_qkv.get(), att.get(), s.B, s.T, C, s.NH, KVH,
                                                   DropoutSite{}, DType::kBFloat16, scratch));
  } else {
    EXPECT_FALSE(kernels.grouped_attention_forward(stream, out.get(), att.get(), d_qkv.get(), s.B,
                                                   s.T, C, s.NH, KVH, DropoutSite{},
                                                   DType::kBFloat16, scratch));
    kernels.repeat_kv_forward(stream, heads.get(), d_qkv.get(), N, s.NH, KVH, HS);
    kernels.attention_forward(stream, out.get(), att.get(), heads.get(), s.B, s.T, C, s.NH,
                              DropoutSite{}, DType::kBFloat16, scratch);
    kernels.attention_backward(stream, dheads.get(), datt.get(), d_dout.get(), out.get(),
                               heads.get(), att.get(), s.B, s.T, C, s.NH, DropoutSite{},
                               DType::kBFloat16, scratch);
    kernels.repeat_kv_backward(stream, dqkv.get(), dheads.get(), N, s.NH, KVH, HS);
  }
  return {out.host(), dqkv.host()};
}

// Grouped-query attention on cuDNN without repeating k and v (ZERO_CUDNN_NATIVE_GQA=1) against the
// default path, which repeats them (off unless set): out and dqkv of the same qkv within 1e-3 and
// 1e-2 relative L2 (the native backward sums each group's dk and dv before rounding them to bf16
// once, the repeated path rounds each head's and sums those), both within the oracle's bounds of
// the CPU's repeat_kv + fp32 attention. Each distance printed ("measured: ...") for the GPU log.
// Heads of 32 channels with 3 query heads per key/value head, and 64 with one key/value head.
TEST_F(CudnnAttentionTest, NativeGroupedQueryAttentionMatchesTheRepeatedPath) {
  struct Grouped {
    Shape shape;
    std::int64_t KVH;
  };
  for (const Grouped& g : {Grouped{{2, 37, 192, 6}, 2}, Grouped{{1, 200, 256, 4}, 1}}) {
    const Shape& s = g.shape;
    const std::int64_t N = s.B * s.T, C = s.C, HS = C / s.NH, width = C + 2 * g.KVH * HS;
    const std::string name = "NH " + std::to_string(s.NH) + " KVH " + std::to_string(g.KVH);
    SCOPED_TRACE(name);
    const auto qkv = rounded_to_bf16(testing::random_vector(N * width, 11));
    const auto dout = testing::random_vector(N * C, 12);
    Stream& stream = context_->compute_stream();
    unsetenv("ZERO_CUDNN_NATIVE_GQA");
    const AttentionRun repeated = run_grouped(*kernels_, stream, false, qkv, dout, s, g.KVH);
    setenv("ZERO_CUDNN_NATIVE_GQA", "1", 1);
    const std::unique_ptr<Kernels> native_kernels = make_kernels(*context_);
    unsetenv("ZERO_CUDNN_NATIVE_GQA");
    const AttentionRun native = run_grouped(*native_kernels, stream, true, qkv, dout, s, g.KVH);

    // The oracle: the CPU kernels' repeat_kv and fp32 attention on the same bf16 values.
    const std::unique_ptr<DeviceContext> cpu = make_cpu_context();
    const std::unique_ptr<Kernels> host = make_kernels(*cpu);
    std::vector<float> heads(N * 3 * C), out(N * C), att(s.B * s.NH * s.T * s.T), dheads(N * 3 * C),
        datt(att.size()), dqkv(N * width);
    Stream& host_stream = cpu->compute_stream();
    host->repeat_kv_forward(host_stream, heads.data(), qkv.data(), N, s.NH, g.KVH, HS);
    host_stream.synchronize();
    cpu::attention_forward(out.data(), att.data(), heads.data(), s.B, s.T, C, s.NH, DropoutSite{});
    cpu::attention_backward(dheads.data(), datt.data(), dout.data(), heads.data(), att.data(), s.B,
                            s.T, C, s.NH, DropoutSite{});
    host->repeat_kv_backward(host_stream, dqkv.data(), dheads.data(), N, s.NH, g.KVH, HS);
    host_stream.synchronize();

    const auto expect_below = [&](const std::vector<float>& a, const std::vector<float>& b,
                                  double bound, const std::string& what) {
      const double distance = zero::testing::relative_difference(a, b);
      zero::testing::print_measured(name + " " + what, distance, bound);
      EXPECT_LE(distance, bound) << what;
    };
    expect_below(native.out, repeated.out, 1e-3, "out, native against repeated");
    expect_below(native.dqkv, repeated.dqkv, 1e-2, "dqkv, native against repeated");
    expect_below(native.out, out, 1e-2, "out, native against the CPU");
    expect_below(native.dqkv, dqkv, 2e-2, "dqkv, native against the CPU");
    expect_below(repeated.dqkv, dqkv, 2e-2, "dqkv, repeated against the CPU");
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
