// libzero's CUDA kernel bodies (libzero/src/cuda/elementwise_body.h: fill, scale/axpy, sum of
// squares, convert) run on the CPU by the kernel emulator (tests/common/kernel_emulator.h) over
// the launch grids their launchers compute, against the CPU oracle: the CPU DeviceContext's
// operations. (optim's fused optimizer bodies: tests/optim/optim_cuda_body_emulation_test.cc.)
// Random inputs, odd counts (1, 22, 1023, 4099), fp32, bf16 and fp16. Tolerances: fp32 1e-5
// relative L2; 16-bit outputs within llm.c's bf16 tolerance (one rounding of the fp32 result,
// relative 2^-8 per element). Also the emulator's own divergence checks.
// Exempt: none (libzero's CUDA sources launch no library kernels).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "elementwise_body.h"
#include "kernel_emulation_test.h"
#include "random_inputs.h"
#include "relative_difference.h"
#include "zero/core/device_context.h"
#include "zero/core/dtype.h"
#include "zero/core/error.h"

namespace zero {
namespace {

using kernels::LaunchConfig;
using kernels::emulation::EmulatedThread;
using kernels::emulation::NoShared;
using zero::testing::random_vector;
using zero::testing::relative_difference;

struct EmulatedTypes {
  using BFloat16 = zero::BFloat16;
  using Float16 = zero::Float16;
};

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

class CudaEmulation : public testing::KernelEmulationTest {
 protected:
  std::unique_ptr<DeviceContext> cpu_ = make_cpu_context(StreamStress{});
};

TEST_P(CudaEmulation, ElementwiseKernelsMatchTheCpuContext) {
  Stream& stream = cpu_->compute_stream();
  for (std::size_t count : testing::kEmulationCounts) {
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
  for (std::size_t count : testing::kEmulationCounts) {
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

// At real sizes the grid stops at 65535 blocks and each thread strides over more elements than
// the test sizes reach; here a grid of 3 blocks takes every loop round more than once.
TEST_P(CudaEmulation, GridStrideLoopsCoverEveryElementOnASmallGrid) {
  const LaunchConfig small = kernels::linear_launch(3, kernels::kElementwiseThreads);
  const std::size_t count = 4099;  // five rounds of 768 threads and a part of a sixth
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
    kernels::require_aligned(values + 1, 16, "a vector load");  // 4 bytes past alignment
  });
}

ZERO_EMULATION_THREAD_ORDERS(CudaEmulation);

}  // namespace
}  // namespace zero
