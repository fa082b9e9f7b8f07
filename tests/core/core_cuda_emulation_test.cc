// libzero's CUDA kernel bodies (libzero/src/cuda/elementwise_body.h: fill, scale/axpy, sum of
// squares, convert; optimizer_body.h: Adam/AdamW, SGD, Lamb's two passes) run on the CPU by the
// kernel emulator (tests/common/kernel_emulator.h) over the launch grids their launchers compute,
// against the CPU oracles: the CPU DeviceContext's operations and optim's scalar reference steps.
// Random inputs, odd counts (1, 22, 1023, 4099: tails past the 4-wide vector loop), fp32, bf16
// and fp16, the vector path (aligned arrays) and the scalar one (an array one element off).
// Tolerances: fp32 1e-5 relative L2; 16-bit outputs within llm.c's bf16 tolerance (one rounding of
// the fp32 result, relative 2^-8 per element). Also the emulator's own divergence checks.
// Exempt: none (libzero's CUDA sources launch no library kernels).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "elementwise_body.h"
#include "kernel_emulator.h"
#include "optimizer_body.h"
#include "random_inputs.h"
#include "relative_difference.h"
#include "zero/core/device_context.h"
#include "zero/core/dtype.h"
#include "zero/core/error.h"
#include "zero/optim/kernels.h"

namespace zero {
namespace {

using kernels::LaunchConfig;
using kernels::emulation::EmulatedThread;
using kernels::emulation::NoShared;
using kernels::emulation::Order;
using zero::testing::random_vector;
using zero::testing::relative_difference;

struct EmulatedTypes {
  using BFloat16 = zero::BFloat16;
  using Float16 = zero::Float16;
};

const std::size_t kCounts[] = {1, 22, 1023, 4099};
const DType kDtypes[] = {DType::kFloat32, DType::kBFloat16, DType::kFloat16};

// `count` elements of `dtype` (as bytes) holding `values` rounded.
std::vector<unsigned char> as_dtype(const std::vector<float>& values, DType dtype) {
  std::vector<unsigned char> bytes(values.size() * size_of(dtype));
  convert(values.data(), DType::kFloat32, bytes.data(), dtype, values.size());
  return bytes;
}
std::vector<float> widened(const std::vector<unsigned char>& bytes, DType dtype) {
  std::vector<float> values(bytes.size() / size_of(dtype));
  convert(bytes.data(), dtype, values.data(), DType::kFloat32, values.size());
  return values;
}

double tolerance(DType dtype) { return dtype == DType::kFloat32 ? 1e-5 : 1.0 / 256; }

class CudaEmulation : public ::testing::TestWithParam<Order> {
 protected:
  template <typename Shared = NoShared, typename Body>
  void emulate(const LaunchConfig& config, Body&& body) {
    kernels::emulation::run<Shared>(config, GetParam(), body);
  }
  std::unique_ptr<DeviceContext> cpu_ = make_cpu_context(StreamStress{});
};

TEST_P(CudaEmulation, ElementwiseKernelsMatchTheCpuContext) {
  Stream& stream = cpu_->compute_stream();
  for (std::size_t count : kCounts) {
    for (DType source_dtype : kDtypes) {
      for (DType destination_dtype : kDtypes) {
        SCOPED_TRACE(::testing::Message() << count << " " << name_of(source_dtype) << " -> "
                                          << name_of(destination_dtype));
        const auto source = as_dtype(random_vector<float>(count, 1, 3.0), source_dtype);
        const auto initial = as_dtype(random_vector<float>(count, 2), destination_dtype);
        const LaunchConfig config = kernels::grid_stride_launch(count);
        for (bool accumulate : {false, true}) {
          auto expected = initial, actual = initial;
          if (accumulate)
            cpu_->axpy(stream, source.data(), source_dtype, expected.data(), destination_dtype,
                       count, 0.37f);
          else
            cpu_->scale(stream, source.data(), source_dtype, expected.data(), destination_dtype,
                        count, 0.37f);
          stream.synchronize();
          emulate(config, [&](EmulatedThread& thread, NoShared&) {
            kernels::scale_body<EmulatedTypes>(thread, source.data(), source_dtype, actual.data(),
                                               destination_dtype, count, 0.37f, accumulate);
          });
          EXPECT_LT(relative_difference(widened(actual, destination_dtype),
                                        widened(expected, destination_dtype)),
                    tolerance(destination_dtype))
              << (accumulate ? "axpy" : "scale");
        }
        auto converted = initial, converted_expected = initial;
        cpu_->convert(stream, source.data(), source_dtype, converted_expected.data(),
                      destination_dtype, count);
        stream.synchronize();
        auto run_convert = [&](auto* typed_source, auto* typed_destination) {
          emulate(config, [&](EmulatedThread& thread, NoShared&) {
            kernels::convert_body(thread, typed_source, typed_destination, count);
          });
        };
        auto to = [&](auto* typed_source) {
          switch (destination_dtype) {
            case DType::kFloat32: run_convert(typed_source, (float*)converted.data()); break;
            case DType::kBFloat16: run_convert(typed_source, (BFloat16*)converted.data()); break;
            case DType::kFloat16: run_convert(typed_source, (Float16*)converted.data()); break;
          }
        };
        switch (source_dtype) {
          case DType::kFloat32: to((const float*)source.data()); break;
          case DType::kBFloat16: to((const BFloat16*)source.data()); break;
          case DType::kFloat16: to((const Float16*)source.data()); break;
        }
        EXPECT_EQ(converted, converted_expected) << "convert rounds as zero::convert";
      }
      auto filled = as_dtype(random_vector<float>(count, 3), source_dtype),
           filled_expected = filled;
      cpu_->fill(stream, filled_expected.data(), source_dtype, count, -1.5f);
      stream.synchronize();
      emulate(kernels::grid_stride_launch(count), [&](EmulatedThread& thread, NoShared&) {
        kernels::fill_body<EmulatedTypes>(thread, filled.data(), source_dtype, count, -1.5f);
      });
      EXPECT_EQ(filled, filled_expected) << "fill";
    }
  }
}

TEST_P(CudaEmulation, SumOfSquaresMatchesTheCpuContext) {
  Stream& stream = cpu_->compute_stream();
  for (std::size_t count : kCounts) {
    for (DType dtype : kDtypes) {
      for (bool planted_nan : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << count << " " << name_of(dtype) << " nan " << planted_nan);
        auto values = random_vector<float>(count, 4);
        if (planted_nan) values[count / 2] = std::nanf("");
        const auto x = as_dtype(values, dtype);
        SquaresResult expected;
        cpu_->sum_of_squares(stream, x.data(), dtype, count, &expected);
        stream.synchronize();
        double result[2] = {0.0, 0.0};  // the caller zeroes it on the stream
        emulate<kernels::SquaresShared>(
            kernels::grid_stride_launch(count),
            [&](EmulatedThread& thread, kernels::SquaresShared& shared) {
              kernels::squares_body<EmulatedTypes>(thread, shared, x.data(), dtype, count, result);
            });
        EXPECT_EQ(result[1] != 0.0, expected.nonfinite);
        if (!planted_nan) {
          EXPECT_NEAR(result[0], expected.sum, 1e-12 * expected.sum);
        }
      }
    }
  }
}

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

TEST_P(CudaEmulation, AdamAndSgdBodiesMatchTheCpuReference) {
  for (std::size_t count : kCounts) {
    for (std::size_t offset : {std::size_t{0}, std::size_t{1}}) {
      if (offset >= count) continue;
      SCOPED_TRACE(::testing::Message() << count << " offset " << offset);
      OptimizerState actual(count), expected(count);
      std::vector<BFloat16> copy(count);
      cuda::OptimizerArrays a = arrays_of(actual, offset, copy.data());
      const bool vectorized = cuda::vectorizable(a);
      EXPECT_EQ(vectorized, offset == 0);
      optim::AdamHyperparams hyper;
      hyper.lr = 1e-2, hyper.weight_decay = 0.1, hyper.step = 3, hyper.grad_scale = 0.5;
      const double bc1 = 1.0 - std::pow(hyper.beta1, 3.0), bc2 = 1.0 - std::pow(hyper.beta2, 3.0);
      const cuda::AdamRule adam{
          {static_cast<float>(hyper.beta1), static_cast<float>(1.0 - hyper.beta1),
           static_cast<float>(hyper.beta2), static_cast<float>(1.0 - hyper.beta2),
           static_cast<float>(hyper.eps), static_cast<float>(hyper.lr / bc1),
           static_cast<float>(1.0 / std::sqrt(bc2)),
           static_cast<float>(1.0 - hyper.lr * hyper.weight_decay), 0.0f, 0.5f}};
      emulate(cuda::optimizer_launch(a.count, vectorized), [&](EmulatedThread& thread, NoShared&) {
        cuda::update_body(thread, a.params, static_cast<const float*>(a.grads), a.state0, a.state1,
                          copy.data(), a.count, adam, vectorized);
      });
      optim::adam_step_reference(expected.params.data() + offset, expected.grads.data() + offset,
                                 expected.exp_avg.data() + offset,
                                 expected.exp_avg_sq.data() + offset, a.count, hyper);
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
      emulate(cuda::optimizer_launch(a.count, vectorized), [&](EmulatedThread& thread, NoShared&) {
        cuda::update_body(thread, a.params, grads16.data() + offset, a.state0, a.state1,
                          static_cast<BFloat16*>(nullptr), a.count, adam, vectorized);
      });
      optim::adam_step_reference(expected.params.data() + offset, expected.grads.data() + offset,
                                 expected.exp_avg.data() + offset,
                                 expected.exp_avg_sq.data() + offset, a.count, hyper);
      EXPECT_LT(relative_difference(actual.params, expected.params), 1e-5);
      EXPECT_LT(relative_difference(actual.exp_avg_sq, expected.exp_avg_sq), 1e-5);

      // SGD with Nesterov momentum, past its first step, fp16 gradients.
      optim::SgdHyperparams sgd;
      sgd.lr = 0.1, sgd.momentum = 0.9, sgd.dampening = 0.1, sgd.weight_decay = 0.01;
      sgd.nesterov = true, sgd.first_step = false;
      std::vector<Float16> half_grads(count);
      convert(actual.grads.data(), DType::kFloat32, half_grads.data(), DType::kFloat16, count);
      convert(half_grads.data(), DType::kFloat16, expected.grads.data(), DType::kFloat32, count);
      const cuda::SgdMomentumRule momentum{{0.1f, 0.9f, 0.9f, 0.01f, 1.0f, true, false, true}};
      emulate(cuda::optimizer_launch(a.count, vectorized), [&](EmulatedThread& thread, NoShared&) {
        cuda::update_body(thread, a.params, half_grads.data() + offset, a.state0, a.state1,
                          static_cast<BFloat16*>(nullptr), a.count, momentum, vectorized);
      });
      optim::sgd_step_reference(expected.params.data() + offset, expected.grads.data() + offset,
                                expected.exp_avg.data() + offset, a.count, sgd);
      EXPECT_LT(relative_difference(actual.params, expected.params), 1e-5);
      EXPECT_LT(relative_difference(actual.exp_avg, expected.exp_avg), 1e-5);
    }
  }
}

// The vector loop runs only when every array is aligned for its access; the emulated loads check
// it, so a wrong vectorizable() would throw here.
TEST_P(CudaEmulation, VectorPathNeedsEveryArrayAligned) {
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
    const cuda::SgdPlainRule rule{{0.1f, 0.0f, 1.0f, 0.0f, 1.0f, false, true, false}};
    emulate(cuda::optimizer_launch(count, vectorized), [&](EmulatedThread& thread, NoShared&) {
      cuda::update_body(thread, a.params, static_cast<const float*>(a.grads), a.state0, a.state1,
                        static_cast<BFloat16*>(a.params_16bit), count, rule, vectorized);
    });
    EXPECT_EQ(a.params[count - 1], 0.5f - 0.1f * 0.5f);
  }
}

TEST_P(CudaEmulation, LambPassesMatchTheCpuKernels) {
  for (std::size_t count : kCounts) {
    for (std::size_t offset : {std::size_t{0}, std::size_t{1}}) {
      if (offset >= count) continue;
      SCOPED_TRACE(::testing::Message() << count << " offset " << offset);
      OptimizerState actual(count), expected(count);
      cuda::OptimizerArrays a = arrays_of(actual, offset, nullptr);
      const bool vectorized = cuda::vectorizable(a);
      optim::LambHyperparams hyper;
      hyper.weight_decay = 0.01, hyper.threads = 1;
      const cuda::LambCoefficients c{static_cast<float>(hyper.beta1),
                                     static_cast<float>(1.0 - hyper.beta1),
                                     static_cast<float>(hyper.beta2),
                                     static_cast<float>(1.0 - hyper.beta2),
                                     static_cast<float>(hyper.eps),
                                     static_cast<float>(hyper.weight_decay),
                                     1.0f};
      double sums[2] = {0.0, 0.0};
      emulate<cuda::LambSumsShared>(
          cuda::optimizer_launch(a.count, vectorized),
          [&](EmulatedThread& thread, cuda::LambSumsShared& shared) {
            cuda::lamb_moments_body(thread, shared, a.params, static_cast<const float*>(a.grads),
                                    a.state0, a.state1, a.count, c, sums, vectorized);
          });
      const optim::SumsOfSquares expected_sums = optim::lamb_moments(
          expected.params.data() + offset, expected.grads.data() + offset,
          expected.exp_avg.data() + offset, expected.exp_avg_sq.data() + offset, a.count, hyper);
      EXPECT_NEAR(sums[0], expected_sums.params, 1e-6 * expected_sums.params);
      EXPECT_NEAR(sums[1], expected_sums.update, 1e-5 * expected_sums.update);
      EXPECT_LT(relative_difference(actual.exp_avg, expected.exp_avg), 1e-5);
      EXPECT_LT(relative_difference(actual.exp_avg_sq, expected.exp_avg_sq), 1e-5);

      const double ratio = optim::lamb_trust_ratio(sums[0], sums[1], hyper);
      const float step = static_cast<float>(hyper.lr * ratio);  // no bias correction at step 1
      hyper.bias_correction = false;
      const cuda::LambApplyRule apply{c.eps, c.weight_decay, step};
      std::vector<Float16> copy(count);
      emulate(cuda::optimizer_launch(a.count, vectorized), [&](EmulatedThread& thread, NoShared&) {
        cuda::update_body(thread, a.params, static_cast<const float*>(nullptr), a.state0, a.state1,
                          copy.data(), a.count, apply, vectorized);
      });
      optim::lamb_apply(expected.params.data() + offset, expected.exp_avg.data() + offset,
                        expected.exp_avg_sq.data() + offset, a.count, hyper, ratio);
      EXPECT_LT(relative_difference(actual.params, expected.params), 1e-5);
    }
  }
}

// At real sizes the grid stops at 65535 blocks and each thread strides over more elements than
// the test sizes reach; here a grid of 3 blocks takes every loop round more than once.
TEST_P(CudaEmulation, GridStrideLoopsCoverEveryElementOnASmallGrid) {
  const LaunchConfig small = kernels::linear_launch(3, kernels::kElementwiseThreads);
  const std::size_t count = 4099;  // 1024 groups of 4 and a tail of 3: two rounds of 768 threads
  const auto values = random_vector<float>(count, 9);
  std::vector<BFloat16> narrowed(count), expected(count);
  convert(values.data(), DType::kFloat32, expected.data(), DType::kBFloat16, count);
  emulate(small, [&](EmulatedThread& thread, NoShared&) {
    kernels::convert_body(thread, values.data(), narrowed.data(), count);
  });
  for (std::size_t i = 0; i < count; ++i) ASSERT_EQ(narrowed[i].bits, expected[i].bits) << i;
  double sums[2] = {0.0, 0.0};
  emulate<kernels::SquaresShared>(small, [&](EmulatedThread& thread, kernels::SquaresShared& s) {
    kernels::squares_body<EmulatedTypes>(thread, s, values.data(), DType::kFloat32, count, sums);
  });
  double expected_sum = 0.0;
  for (float v : values) expected_sum += static_cast<double>(v) * v;
  EXPECT_NEAR(sums[0], expected_sum, 1e-12 * expected_sum);
  for (bool vectorized : {false, true}) {
    OptimizerState actual(count), expected_state(count);
    cuda::OptimizerArrays a = arrays_of(actual, 0, nullptr);
    const cuda::SgdMomentumRule rule{{0.1f, 0.9f, 1.0f, 0.0f, 1.0f, true, false, false}};
    emulate(small, [&](EmulatedThread& thread, NoShared&) {
      cuda::update_body(thread, a.params, static_cast<const float*>(a.grads), a.state0, a.state1,
                        static_cast<BFloat16*>(nullptr), count, rule, vectorized);
    });
    optim::SgdHyperparams sgd;
    sgd.lr = 0.1, sgd.momentum = 0.9, sgd.first_step = false;
    optim::sgd_step_reference(expected_state.params.data(), expected_state.grads.data(),
                              expected_state.exp_avg.data(), count, sgd);
    EXPECT_LT(relative_difference(actual.params, expected_state.params), 1e-5) << vectorized;
    EXPECT_LT(relative_difference(actual.exp_avg, expected_state.exp_avg), 1e-5) << vectorized;
  }
}

TEST_P(CudaEmulation, ShufflesExchangeAsTheHardwareAndDivergenceIsAnError) {
  // Lane i receives lane i ^ mask's value; a butterfly sum gives every lane the total.
  std::vector<float> received(64), sums(64);
  emulate(kernels::linear_launch(1, 64), [&](EmulatedThread& thread, NoShared&) {
    const unsigned t = thread.thread_index().x;
    received[t] = thread.shfl_xor(static_cast<float>(t), 5);
    sums[t] = kernels::warp_sum(thread, static_cast<float>(t));
  });
  for (unsigned t = 0; t < 64; ++t) {
    EXPECT_EQ(received[t], static_cast<float>((t & ~31u) + ((t % 32) ^ 5)));
    EXPECT_EQ(sums[t], t < 32 ? 496.0f : 1520.0f);
  }
  auto expect_error = [&](const char* message, auto&& body) {
    try {
      emulate(kernels::linear_launch(2, 64), body);
      ADD_FAILURE() << "no error; expected " << message;
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find(message), std::string::npos) << error.what();
    }
  };
  expect_error("lanes wait at different primitives", [](EmulatedThread& thread, NoShared&) {
    if (thread.thread_index().x != 3) kernels::warp_sum(thread, 1.0f);  // lane 3 exits
  });
  expect_error("threads wait at __syncthreads after", [](EmulatedThread& thread, NoShared&) {
    if (thread.thread_index().x >= 32) thread.sync_block();  // warp 0 exits first
  });
  expect_error("is not aligned", [](EmulatedThread&, NoShared&) {
    alignas(16) float values[8] = {};
    float out[cuda::kVector];
    cuda::load4(values + 1, out);  // a 16-byte access 4 bytes past alignment
  });
}

INSTANTIATE_TEST_SUITE_P(Orders, CudaEmulation, ::testing::Values(Order::kForward, Order::kReverse),
                         [](const ::testing::TestParamInfo<Order>& param) {
                           return param.param == Order::kForward ? "ForwardThreadOrder"
                                                                 : "ReverseThreadOrder";
                         });

}  // namespace
}  // namespace zero
