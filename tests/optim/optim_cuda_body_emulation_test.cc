// optim/'s fused CUDA optimizer bodies (optim/src/cuda/optimizer_body.h: Adam/AdamW, SGD, Lamb's
// two passes) run on the CPU by the kernel emulator (tests/common/kernel_emulator.h) over the
// launch grids their launchers compute, against optim's scalar reference steps and CPU kernels,
// with the coefficients both take (optim/src/coefficients.h). Random inputs, odd counts (1, 22,
// 1023, 4099: tails past the 4-wide vector loop), fp32, bf16 and fp16 gradients, the vector path
// (aligned arrays) and the scalar one (an array one element off). Tolerance: fp32 1e-5 relative
// L2. No device and no CUDA toolkit needed.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kernel_emulation_test.h"
#include "optimizer_body.h"
#include "random_inputs.h"
#include "relative_difference.h"
#include "zero/core/dtype.h"
#include "zero/core/error.h"
#include "zero/optim/kernels.h"

namespace zero::optim {
namespace {

using zero::testing::random_vector;
using zero::testing::relative_difference;

using OptimizerBodyEmulation = testing::KernelEmulationTest;

// The fp32 state of one optimizer pass, and 16-bit copies of gradients and parameters.
struct OptimizerState {
  std::vector<float> params, grads, exp_avg, exp_avg_sq;
  explicit OptimizerState(std::size_t count)
      : params(random_vector<float>(count, 5)),
        grads(random_vector<float>(count, 6)),
        exp_avg(random_vector<float>(count, 7, 0.1)),
        exp_avg_sq(random_vector<float>(count, 8, 0.1)) {
    for (float& v : exp_avg_sq) v = v * v;
  }
};

// The launcher's arrays over `state` starting `offset` elements in (offset 1: the scalar path).
cuda::OptimizerArrays arrays_of(OptimizerState& state, std::size_t offset, void* copy) {
  cuda::OptimizerArrays a;
  a.params = state.params.data() + offset;
  a.grads = state.grads.data() + offset;
  a.state0 = state.exp_avg.data() + offset;
  a.state1 = state.exp_avg_sq.data() + offset;
  a.params_16bit = copy;
  a.count = state.params.size() - offset;
  return a;
}

TEST_P(OptimizerBodyEmulation, AdamAndSgdBodiesMatchTheCpuReference) {
  for (std::size_t count : testing::kEmulationCounts) {
    for (std::size_t offset : {std::size_t{0}, std::size_t{1}}) {
      if (offset >= count) continue;
      SCOPED_TRACE(::testing::Message() << count << " offset " << offset);
      OptimizerState actual(count), expected(count);
      std::vector<BFloat16> copy(count);
      cuda::OptimizerArrays a = arrays_of(actual, offset, copy.data());
      const bool vectorized = cuda::vectorizable(a);
      EXPECT_EQ(vectorized, offset == 0);
      AdamHyperparams hyper;
      hyper.lr = 1e-2, hyper.weight_decay = 0.1, hyper.step = 3, hyper.grad_scale = 0.5;
      const cuda::AdamRule adam{adam_coefficients(hyper)};
      emulate(cuda::optimizer_launch(a.count, vectorized), [&](auto& thread, auto&) {
        cuda::update_body(thread, a.params, static_cast<const float*>(a.grads), a.state0, a.state1,
                          copy.data(), a.count, adam, vectorized);
      });
      adam_step_reference(expected.params.data() + offset, expected.grads.data() + offset,
                          expected.exp_avg.data() + offset, expected.exp_avg_sq.data() + offset,
                          a.count, hyper);
      EXPECT_LT(relative_difference(actual.params, expected.params), 1e-5);
      EXPECT_LT(relative_difference(actual.exp_avg, expected.exp_avg), 1e-5);
      EXPECT_LT(relative_difference(actual.exp_avg_sq, expected.exp_avg_sq), 1e-5);
      for (std::size_t i = 0; i < a.count; ++i)
        ASSERT_EQ(to_float(copy[i]), to_float(to_bf16(actual.params[offset + i]))) << i;

      // Again from the updated state with bf16 gradients, read through the vector path's 8-byte
      // loads.
      std::vector<BFloat16> grads16(count);
      convert(actual.grads.data(), DType::kFloat32, grads16.data(), DType::kBFloat16, count);
      convert(grads16.data(), DType::kBFloat16, expected.grads.data(), DType::kFloat32, count);
      emulate(cuda::optimizer_launch(a.count, vectorized), [&](auto& thread, auto&) {
        cuda::update_body(thread, a.params, grads16.data() + offset, a.state0, a.state1,
                          static_cast<BFloat16*>(nullptr), a.count, adam, vectorized);
      });
      adam_step_reference(expected.params.data() + offset, expected.grads.data() + offset,
                          expected.exp_avg.data() + offset, expected.exp_avg_sq.data() + offset,
                          a.count, hyper);
      EXPECT_LT(relative_difference(actual.params, expected.params), 1e-5);
      EXPECT_LT(relative_difference(actual.exp_avg_sq, expected.exp_avg_sq), 1e-5);

      // SGD with Nesterov momentum, past its first step, fp16 gradients.
      SgdHyperparams sgd;
      sgd.lr = 0.1, sgd.momentum = 0.9, sgd.dampening = 0.1, sgd.weight_decay = 0.01;
      sgd.nesterov = true, sgd.first_step = false;
      std::vector<Float16> half_grads(count);
      convert(actual.grads.data(), DType::kFloat32, half_grads.data(), DType::kFloat16, count);
      convert(half_grads.data(), DType::kFloat16, expected.grads.data(), DType::kFloat32, count);
      const cuda::SgdMomentumRule momentum{sgd_coefficients(sgd)};
      emulate(cuda::optimizer_launch(a.count, vectorized), [&](auto& thread, auto&) {
        cuda::update_body(thread, a.params, half_grads.data() + offset, a.state0, a.state1,
                          static_cast<BFloat16*>(nullptr), a.count, momentum, vectorized);
      });
      sgd_step_reference(expected.params.data() + offset, expected.grads.data() + offset,
                         expected.exp_avg.data() + offset, a.count, sgd);
      EXPECT_LT(relative_difference(actual.params, expected.params), 1e-5);
      EXPECT_LT(relative_difference(actual.exp_avg, expected.exp_avg), 1e-5);
    }
  }
}

// The vector loop runs only when every array is aligned for its access; the emulated loads check
// it, so a wrong vectorizable() would throw here.
TEST_P(OptimizerBodyEmulation, VectorPathNeedsEveryArrayAligned) {
  const std::size_t count = 22;
  alignas(16) float params[count + 4], grads[count + 4], m[count + 4], v[count + 4];
  alignas(16) BFloat16 copy[count + 4];
  for (int misaligned = -1; misaligned < 5; ++misaligned) {
    SCOPED_TRACE(misaligned);
    const int k = misaligned;
    cuda::OptimizerArrays a;
    a.params = params + (k == 0), a.grads = grads + (k == 1), a.state0 = m + (k == 2);
    a.state1 = v + (k == 3), a.params_16bit = copy + (k == 4), a.count = count;
    a.grads_dtype = DType::kFloat32;
    for (float* array : {params, grads, m, v}) std::fill(array, array + count + 4, 0.5f);
    const bool vectorized = cuda::vectorizable(a);
    EXPECT_EQ(vectorized, misaligned < 0);
    SgdHyperparams sgd;
    sgd.lr = 0.1;
    const cuda::SgdPlainRule rule{sgd_coefficients(sgd)};
    emulate(cuda::optimizer_launch(count, vectorized), [&](auto& thread, auto&) {
      cuda::update_body(thread, a.params, static_cast<const float*>(a.grads), a.state0, a.state1,
                        static_cast<BFloat16*>(a.params_16bit), count, rule, vectorized);
    });
    EXPECT_EQ(a.params[count - 1], 0.5f - 0.1f * 0.5f);
  }
}

TEST_P(OptimizerBodyEmulation, LambPassesMatchTheCpuKernels) {
  for (std::size_t count : testing::kEmulationCounts) {
    for (std::size_t offset : {std::size_t{0}, std::size_t{1}}) {
      if (offset >= count) continue;
      SCOPED_TRACE(::testing::Message() << count << " offset " << offset);
      OptimizerState actual(count), expected(count);
      cuda::OptimizerArrays a = arrays_of(actual, offset, nullptr);
      const bool vectorized = cuda::vectorizable(a);
      LambHyperparams hyper;
      hyper.weight_decay = 0.01, hyper.threads = 1;
      const LambCoefficients c = lamb_coefficients(hyper);
      double sums[2] = {0.0, 0.0};
      emulate<cuda::LambSumsShared>(
          cuda::optimizer_launch(a.count, vectorized),
          [&](auto& thread, cuda::LambSumsShared& shared) {
            cuda::lamb_moments_body(thread, shared, a.params, static_cast<const float*>(a.grads),
                                    a.state0, a.state1, a.count, c, sums, vectorized);
          });
      const SumsOfSquares expected_sums = lamb_moments(
          expected.params.data() + offset, expected.grads.data() + offset,
          expected.exp_avg.data() + offset, expected.exp_avg_sq.data() + offset, a.count, hyper);
      EXPECT_NEAR(sums[0], expected_sums.params, 1e-6 * expected_sums.params);
      EXPECT_NEAR(sums[1], expected_sums.update, 1e-5 * expected_sums.update);
      EXPECT_LT(relative_difference(actual.exp_avg, expected.exp_avg), 1e-5);
      EXPECT_LT(relative_difference(actual.exp_avg_sq, expected.exp_avg_sq), 1e-5);

      const double ratio = lamb_trust_ratio(sums[0], sums[1], hyper);
      const float step = static_cast<float>(hyper.lr * ratio);  // no bias correction at step 1
      hyper.bias_correction = false;
      const cuda::LambApplyRule apply{c.eps, c.weight_decay, step};
      std::vector<Float16> copy(count);
      emulate(cuda::optimizer_launch(a.count, vectorized), [&](auto& thread, auto&) {
        cuda::update_body(thread, a.params, static_cast<const float*>(nullptr), a.state0, a.state1,
                          copy.data(), a.count, apply, vectorized);
      });
      lamb_apply(expected.params.data() + offset, expected.exp_avg.data() + offset,
                 expected.exp_avg_sq.data() + offset, a.count, hyper, ratio);
      EXPECT_LT(relative_difference(actual.params, expected.params), 1e-5);
    }
  }
}

// At real sizes the grid stops at 65535 blocks and each thread strides over more elements than
// the test sizes reach; here a grid of 3 blocks takes every loop round more than once.
TEST_P(OptimizerBodyEmulation, GridStrideLoopsCoverEveryElementOnASmallGrid) {
  const kernels::LaunchConfig small = kernels::linear_launch(3, cuda::kOptimizerThreads);
  const std::size_t count = 4099;  // 1024 groups of 4 and a tail of 3: two rounds of 768 threads
  for (bool vectorized : {false, true}) {
    OptimizerState actual(count), expected_state(count);
    cuda::OptimizerArrays a = arrays_of(actual, 0, nullptr);
    SgdHyperparams sgd;
    sgd.lr = 0.1, sgd.momentum = 0.9, sgd.first_step = false;
    const cuda::SgdMomentumRule rule{sgd_coefficients(sgd)};
    emulate(small, [&](auto& thread, auto&) {
      cuda::update_body(thread, a.params, static_cast<const float*>(a.grads), a.state0, a.state1,
                        static_cast<BFloat16*>(nullptr), count, rule, vectorized);
    });
    sgd_step_reference(expected_state.params.data(), expected_state.grads.data(),
                       expected_state.exp_avg.data(), count, sgd);
    EXPECT_LT(relative_difference(actual.params, expected_state.params), 1e-5) << vectorized;
    EXPECT_LT(relative_difference(actual.exp_avg, expected_state.exp_avg), 1e-5) << vectorized;
  }
}

TEST_P(OptimizerBodyEmulation, AMisalignedVectorAccessIsAnError) {
  try {
    emulate(kernels::linear_launch(1, 32), [](auto&, auto&) {
      alignas(16) float values[8] = {};
      float out[cuda::kVector];
      cuda::load4(values + 1, out);  // a 16-byte access 4 bytes past alignment
    });
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("is not aligned"), std::string::npos) << error.what();
  }
}

ZERO_EMULATION_THREAD_ORDERS(OptimizerBodyEmulation);

}  // namespace
}  // namespace zero::optim
