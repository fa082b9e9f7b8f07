// The Llama family's kernels through the model's seam (zero/gpt2/kernels.h: norm_* with RMSNorm,
// rope_table, rope_forward/backward, swiglu_*) on a device context, against the CPU kernels
// (layers_cpu.h) run here on the host on the same inputs. Shared by llama_kernels_seam_test (the
// CPU backend, host and asynchronous modes: bit for bit) and llama_cuda_test (CUDA, label cuda:
// within bounds). Inputs reach the device through the context's own allocator and copies.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "../common/random_inputs.h"
#include "../common/relative_difference.h"
#include "zero/core/allocator.h"
#include "zero/core/device_context.h"
#include "zero/core/error.h"
#include "zero/gpt2/kernels.h"
#include "zero/gpt2/layers_cpu.h"
#include "zero/gpt2/rope.h"

namespace zero::gpt2::testing {

// Device buffers of `context`, filled from and read back to host vectors on its compute stream.
class SeamBuffers {
 public:
  explicit SeamBuffers(DeviceContext& context)
      : context_(context), stream_(context.compute_stream()) {}
  // Waits for the copy: on the CPU backend in host mode the kernels run on the calling thread, not
  // in the stream's order (the engine, too, waits before handing the model a buffer).
  float* upload(const std::vector<float>& host) {
    float* device = allocate(host.size());
    context_.copy(stream_, host.data(), device, host.size() * sizeof(float));
    stream_.synchronize();
    return device;
  }
  float* allocate(std::size_t count) {
    buffers_.push_back(
        std::make_unique<Buffer>(context_.allocator(MemorySpace::kDevice)
                                     .allocate(std::max<std::size_t>(count, 1) * sizeof(float),
                                               MemoryCategory::kActivations)));
    return buffers_.back()->data_as<float>();
  }
  std::vector<float> download(const float* device, std::size_t count) {
    std::vector<float> host(count);
    context_.copy(stream_, device, host.data(), count * sizeof(float));
    stream_.synchronize();
    return host;
  }
  Stream& stream() { return stream_; }

 private:
  DeviceContext& context_;
  Stream& stream_;
  std::vector<std::unique_ptr<Buffer>> buffers_;
};

// Every element within bound · max(1, |expected|) (bound 0: bit for bit).
inline void expect_seam_close(const std::vector<float>& actual, const std::vector<float>& expected,
                              double bound, const char* what) {
  const zero::testing::ElementwiseDifference worst =
      zero::testing::elementwise_difference(actual, expected);
  EXPECT_LE(worst.difference, bound) << what << ": element " << worst.index;
}

// RMSNorm through norm_forward, residual_norm_forward (dropout on) and norm_backward.
inline void expect_seam_rmsnorm(DeviceContext& context, double bound) {
  const std::int64_t B = 3, T = 7, C = 45, N = B * T;
  const float epsilon = 1e-5f;
  const auto residual = random_vector(N * C, 1), inp = random_vector(N * C, 2),
             weight = random_vector(C, 3), dout = random_vector(N * C, 4),
             dinp0 = random_vector(N * C, 5), dweight0 = random_vector(C, 6);
  DropoutSite dropout;
  dropout.probability = 0.25f;
  dropout.key = derive_key(11, 2);
  std::vector<float> sum(N * C), out(N * C), rstd(N), dinp = dinp0, dweight = dweight0;
  cpu::residual_dropout_forward(sum.data(), residual.data(), inp.data(), B, T, C, dropout);
  cpu::rmsnorm_forward(out.data(), rstd.data(), sum.data(), weight.data(), N, C, epsilon);
  cpu::rmsnorm_backward(dinp.data(), dweight.data(), dout.data(), sum.data(), weight.data(),
                        rstd.data(), N, C);

  const std::unique_ptr<Kernels> kernels = make_kernels(context);
  SeamBuffers d(context);
  float *d_sum = d.allocate(N * C), *d_out = d.allocate(N * C), *d_rstd = d.allocate(N);
  float *d_weight = d.upload(weight), *d_dinp = d.upload(dinp0), *d_dweight = d.upload(dweight0);
  const Norm norm{NormKind::kRmsNorm, d_weight, nullptr, epsilon};
  kernels->residual_norm_forward(d.stream(), d_sum, d_out, {nullptr, d_rstd}, d.upload(residual),
                                 d.upload(inp), norm, B, T, C, dropout);
  expect_seam_close(d.download(d_sum, N * C), sum, bound, "residual_norm_forward residual_out");
  expect_seam_close(d.download(d_out, N * C), out, bound, "residual_norm_forward out");
  expect_seam_close(d.download(d_rstd, N), rstd, bound, "residual_norm_forward rstd");
  float* d_plain = d.allocate(N * C);
  kernels->norm_forward(d.stream(), d_plain, {nullptr, d_rstd}, d_sum, norm, N, C);
  expect_seam_close(d.download(d_plain, N * C), out, bound, "norm_forward out");
  kernels->norm_backward(d.stream(), d_dinp, d_dweight, nullptr, d.upload(dout), d_sum, norm,
                         nullptr, d_rstd, N, C);
  expect_seam_close(d.download(d_dinp, N * C), dinp, bound, "norm_backward dinp");
  expect_seam_close(d.download(d_dweight, C), dweight, 10 * bound, "norm_backward dweight");
  const Norm with_bias{NormKind::kRmsNorm, d_weight, d_weight, epsilon};
  const NormStatistics kept{nullptr, d_rstd};
  EXPECT_THROW(kernels->norm_forward(d.stream(), d_plain, kept, d_sum, with_bias, N, C),
               zero::Error)
      << "RMSNorm with a bias";
}

// The table written by the seam; q and k of a GQA qkv row (NH 4, NKV 2, head_dim 12) rotated at a
// generation offset with llama3 frequencies, forward then backward; a layout past its table
// refused.
inline void expect_seam_rope(DeviceContext& context, double bound) {
  const RopeParameters parameters{12, 500000.0, {RopeScaling::Type::kLlama3, 8.0, 1.0, 4.0, 32.0}};
  const RopeLayout layout{2, 9, 6, 12, 8 * 12, 5};
  const std::int64_t positions = 14, n = layout.B * layout.T * layout.row_stride;
  const std::vector<float> table = rope_table(parameters, positions);
  const auto x = random_vector(n, 7), dy = random_vector(n, 8);
  std::vector<float> rotated = x, dx = dy;
  cpu::rope_forward(rotated.data(), table.data(), layout);
  cpu::rope_backward(dx.data(), table.data(), layout);

  const std::unique_ptr<Kernels> kernels = make_kernels(context);
  SeamBuffers d(context);
  float* d_table = d.allocate(table.size());
  kernels->rope_table(d.stream(), d_table, parameters, positions);
  expect_seam_close(d.download(d_table, table.size()), table, 0.0, "rope_table");
  float *d_x = d.upload(x), *d_dy = d.upload(dy);
  kernels->rope_forward(d.stream(), d_x, d_table, positions, layout);
  kernels->rope_backward(d.stream(), d_dy, d_table, positions, layout);
  expect_seam_close(d.download(d_x, n), rotated, bound, "rope_forward");
  expect_seam_close(d.download(d_dy, n), dx, bound, "rope_backward");
  RopeLayout past = layout;
  past.position_offset = 6;
  EXPECT_THROW(kernels->rope_forward(d.stream(), d_x, d_table, positions, past), zero::Error)
      << "positions 6..14 of a 14-position table";
}

inline void expect_seam_swiglu(DeviceContext& context, double bound) {
  const std::int64_t N = 13, H = 37;
  const auto inp = random_vector(N * 2 * H, 9, 3.0), dout = random_vector(N * H, 10);
  std::vector<float> out(N * H), dinp(N * 2 * H);
  cpu::swiglu_forward(out.data(), inp.data(), N, H);
  cpu::swiglu_backward(dinp.data(), dout.data(), inp.data(), N, H);
  const std::unique_ptr<Kernels> kernels = make_kernels(context);
  SeamBuffers d(context);
  float *d_inp = d.upload(inp), *d_out = d.allocate(N * H), *d_dinp = d.allocate(N * 2 * H);
  kernels->swiglu_forward(d.stream(), d_out, d_inp, N, H);
  kernels->swiglu_backward(d.stream(), d_dinp, d.upload(dout), d_inp, N, H);
  expect_seam_close(d.download(d_out, N * H), out, bound, "swiglu_forward");
  expect_seam_close(d.download(d_dinp, N * 2 * H), dinp, bound, "swiglu_backward");
}

}  // namespace zero::gpt2::testing
