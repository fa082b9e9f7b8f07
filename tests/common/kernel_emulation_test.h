// The fixture of a kernel-body test on the emulator (kernel_emulator.h), parameterised over the
// thread order: emulate(config, body) runs body(thread, shared) over `config` in the test's order.
// Instantiate with ZERO_EMULATION_THREAD_ORDERS(Suite).
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <string>

#include "kernel_emulator.h"

namespace zero::testing {

// Counts with tails past a 4-wide vector loop and past a block.
inline constexpr std::size_t kEmulationCounts[] = {1, 22, 1023, 4099};

class KernelEmulationTest : public ::testing::TestWithParam<kernels::emulation::Order> {
 protected:
  template <typename Shared = kernels::emulation::NoShared, typename Body>
  void emulate(const kernels::LaunchConfig& config, Body&& body) {
    kernels::emulation::run<Shared>(config, GetParam(), body);
  }
};

inline std::string thread_order_name(
    const ::testing::TestParamInfo<kernels::emulation::Order>& param) {
  return param.param == kernels::emulation::Order::kForward ? "ForwardThreadOrder"
                                                            : "ReverseThreadOrder";
}

}  // namespace zero::testing

#define ZERO_EMULATION_THREAD_ORDERS(suite)                                                \
  INSTANTIATE_TEST_SUITE_P(Orders, suite,                                                  \
                           ::testing::Values(::zero::kernels::emulation::Order::kForward,  \
                                             ::zero::kernels::emulation::Order::kReverse), \
                           ::zero::testing::thread_order_name)
