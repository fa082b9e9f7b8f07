// The fixture the GPT-2 CUDA kernel emulation tests share (gpt2_cuda_emulation_test.cc: layers and
// rows; gpt2_cuda_attention_emulation_test.cc: attention): the kernel bodies run on the CPU by the
// kernel emulator (tests/common/kernel_emulator.h) over the launch grids their launchers compute,
// threads in forward and reverse order within each phase (the test parameter), against the CPU
// kernels; random inputs and odd sizes.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "../common/random_inputs.h"
#include "attention_body.h"
#include "attention_flash_backward.h"
#include "attention_flash_body.h"
#include "kernel_emulator.h"
#include "layers_body.h"
#include "relative_difference.h"
#include "rows_body.h"
#include "token_buckets.h"
#include "zero/core/device_context.h"
#include "zero/core/dtype.h"
#include "zero/core/stream.h"
#include "zero/gpt2/kernels.h"
#include "zero/gpt2/layers_cpu.h"

namespace zero::gpt2::emulation_test {

using kernels::LaunchConfig;
using kernels::emulation::Order;
using testing::random_tokens;
using testing::random_vector;
using zero::testing::relative_difference;

constexpr double kTolerance = 1e-5;
constexpr float kEpsilon = 1e-5f;

struct Shape {
  std::int64_t B, T, C;
};
// C = 37 and 70: neither a multiple of 32 nor of 4; 3 × 100 rows span two row chunks of 256.
const Shape kShapes[] = {{2, 5, 37}, {1, 1, 3}, {3, 100, 70}};

inline DropoutSite dropout_site(bool active) {
  DropoutSite site;
  if (active) {
    site.probability = 0.25f;
    site.key = derive_key(7, 3);
    site.sample_offset = 5;
  }
  return site;
}

inline std::vector<float> nan_vector(std::int64_t count) {
  return std::vector<float>(static_cast<std::size_t>(count),
                            std::numeric_limits<float>::quiet_NaN());
}

// Every element within `bound` · max(1, |expected|), and finite where expected is.
inline void expect_elementwise(const std::vector<float>& actual, const std::vector<float>& expected,
                               double bound, const char* what) {
  const zero::testing::ElementwiseDifference worst =
      zero::testing::elementwise_difference(actual, expected);
  EXPECT_LE(worst.difference, bound)
      << what << ": element " << worst.index << ": "
      << (worst.index < actual.size() ? actual[worst.index] : 0.0f) << " vs "
      << (worst.index < expected.size() ? expected[worst.index] : 0.0f);
}

// Each element of a 16-bit result the fp32 value rounded once: within half a bf16 unit (2^-8
// relative) of the fp32 oracle's.
inline void expect_bf16_rounded(const std::vector<BFloat16>& actual,
                                const std::vector<float>& fp32) {
  ASSERT_EQ(actual.size(), fp32.size());
  for (std::size_t i = 0; i < actual.size(); ++i)
    ASSERT_LE(std::fabs(double{to_float(actual[i])} - fp32[i]),
              0.00390625 * std::fabs(fp32[i]) + 1e-6)
        << "element " << i << ": " << to_float(actual[i]) << " vs " << fp32[i];
}

// ‖actual − expected‖ / ‖expected‖ below kTolerance, and each element within `bound` (above): the
// norm alone lets one element of 80,000 be off by 1e-3. Each call's bound is about three times the
// largest difference measured against the CPU kernels (0: bit for bit), at 1, 2 and 8 OpenMP
// threads alike.
#define EXPECT_CLOSE(actual, expected, bound)                                \
  do {                                                                       \
    EXPECT_LT(relative_difference(actual, expected), kTolerance) << #actual; \
    expect_elementwise(actual, expected, bound, #actual);                    \
  } while (false)

class Gpt2CudaEmulation : public ::testing::TestWithParam<Order> {
 protected:
  // body(thread, shared) over `config`, in this test's thread order.
  template <typename Shared = kernels::emulation::NoShared, typename Body>
  void emulate(const LaunchConfig& config, Body&& body) {
    kernels::emulation::run<Shared>(config, GetParam(), body);
  }

  // The row kernels (rows_body.h) over tables of storage type T against the CPU Kernels.
  template <typename T>
  void expect_rows_match(DType dtype);

  template <typename Terms>
  void column_sums(float* target0, float* target1, const Terms& terms, std::int64_t N,
                   std::int64_t C) {
    if (N == 0 || C == 0) return;
    const std::int64_t chunks = cuda::row_chunks(N);
    auto partial = nan_vector(cuda::column_partials_elements(N, C, Terms::kOutputs));
    emulate<cuda::ColumnPartialsShared<Terms::kOutputs>>(
        cuda::column_partials_launch(N, C), [&](auto& thread, auto& shared) {
          cuda::column_partials_body(thread, shared, partial.data(), terms, N, C);
        });
    emulate(cuda::elementwise_launch(C), [&](auto& thread, auto&) {
      cuda::add_partials_body(thread, target0, target1, partial.data(), chunks, Terms::kOutputs, C);
    });
  }

  // The one-pass layer norm backward as its launcher runs it: the body over its grid with the
  // launch's dynamic shared memory, then the chunks' (dweight, dbias) rows summed as a
  // (chunks, 2·C) table.
  void layernorm_backward(std::vector<float>& dinp, std::vector<float>& dweight,
                          std::vector<float>& dbias, const std::vector<float>& dout,
                          const std::vector<float>& inp, const std::vector<float>& weight,
                          const std::vector<float>& mean, const std::vector<float>& rstd,
                          std::int64_t N, std::int64_t C) {
    const LaunchConfig config = cuda::layernorm_backward_launch(N, C);
    const std::int64_t chunks = cuda::norm_chunks(N);
    auto rows = nan_vector(chunks * 2 * C);
    kernels::emulation::run_grid(config, GetParam(), config.dynamic_shared_bytes,
                                 [&](kernels::emulation::EmulatedThread& thread, void* shared) {
                                   cuda::layernorm_backward_body(
                                       thread, static_cast<float*>(shared), dinp.data(),
                                       rows.data(), dout.data(), inp.data(), weight.data(),
                                       mean.data(), rstd.data(), N, C);
                                 });
    column_sums(dweight.data(), dbias.data(), cuda::BiasTerms{rows.data()}, chunks, 2 * C, C);
  }

  // column_sums over a (N, columns) table whose columns are `outputs` runs of C: the layout
  // add_partials reads with that many outputs.
  template <typename Terms>
  void column_sums(float* target0, float* target1, const Terms& terms, std::int64_t N,
                   std::int64_t columns, std::int64_t C) {
    auto partial = nan_vector(cuda::column_partials_elements(N, columns, 1));
    emulate<cuda::ColumnPartialsShared<1>>(
        cuda::column_partials_launch(N, columns), [&](auto& thread, auto& shared) {
          cuda::column_partials_body(thread, shared, partial.data(), terms, N, columns);
        });
    emulate(cuda::elementwise_launch(C), [&](auto& thread, auto&) {
      cuda::add_partials_body(thread, target0, target1, partial.data(), cuda::row_chunks(N),
                              static_cast<int>(columns / C), C);
    });
  }
};

// Each program instantiates the fixture's tests over both thread orders with this name.
inline std::string order_name(const ::testing::TestParamInfo<kernels::emulation::Order>& param) {
  return param.param == kernels::emulation::Order::kForward ? "ForwardThreadOrder"
                                                            : "ReverseThreadOrder";
}

}  // namespace zero::gpt2::emulation_test
