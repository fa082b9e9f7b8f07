// The kernel emulator's own checks (tests/common/kernel_emulator.h) on small bodies written for
// them: shared memory ends at the launch's bytes (under AddressSanitizer the byte past it is
// poisoned; a view's access past it is an error in every build), and shared-memory races are
// errors in both thread orders: lanes of one warp ordered only by a shuffle, warps ordered only by
// __syncwarp, each hazard (read after write, write after read, write after write), while
// __syncwarp within a warp and __syncthreads across warps order the same accesses.
#include "kernel_emulator.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "zero/core/error.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

namespace zero::kernels {
namespace {

using emulation::EmulatedThread;
using emulation::Order;

class KernelEmulator : public ::testing::TestWithParam<Order> {
 protected:
  // body(thread, view) over one block of `threads` threads with 64 floats of shared memory.
  template <typename Body>
  void run(unsigned threads, Body&& body) {
    LaunchConfig config = linear_launch(1, threads);
    config.dynamic_shared_bytes = 64 * sizeof(float);
    emulation::run_grid(config, GetParam(), 0, [&](EmulatedThread& thread, void* shared) {
      body(thread, thread.shared(static_cast<float*>(shared)));
    });
  }
  // `body` raises an error whose message holds each of `parts`.
  template <typename Body>
  void expect_error(unsigned threads, const std::vector<std::string>& parts, Body&& body) {
    try {
      run(threads, body);
      ADD_FAILURE() << "no error; expected " << parts.front();
    } catch (const Error& error) {
      for (const std::string& part : parts)
        EXPECT_NE(std::string(error.what()).find(part), std::string::npos) << error.what();
    }
  }
};

float read(const emulation::CheckedElement<float>& element) { return element; }

TEST_P(KernelEmulator, SharedMemoryEndsAtTheLaunchsBytes) {
  LaunchConfig config = linear_launch(2, 32);
  config.dynamic_shared_bytes = 37 * sizeof(float);
  int blocks = 0;
  emulation::run_grid(config, GetParam(), 0, [&](EmulatedThread& thread, void* shared) {
    const auto floats = thread.shared(static_cast<float*>(shared));
    if (thread.thread_index().x != 0) return;
    floats[36] = 1.0f;  // the last element
    ++blocks;
#if defined(__SANITIZE_ADDRESS__)
    char* base = static_cast<char*>(shared);
    EXPECT_EQ(__asan_region_is_poisoned(base, 37 * sizeof(float)), nullptr);
    EXPECT_TRUE(__asan_address_is_poisoned(base + 37 * sizeof(float)));
#endif
  });
  EXPECT_EQ(blocks, 2);
  expect_error(32, {"past the block's 256"}, [](EmulatedThread& thread, auto floats) {
    if (thread.thread_index().x == 5) floats[64] = 0.0f;  // one past the end
  });
  expect_error(32, {"outside the block's 256 bytes"}, [](EmulatedThread& thread, auto) {
    float local[4] = {};
    thread.shared(local)[0] = 1.0f;
  });
}

TEST_P(KernelEmulator, LanesOrderedOnlyByAShuffleRace) {
  // Lane l writes word l, then reads lane l + 1's: the butterfly between orders values, not memory.
  auto neighbours = [](bool sync_warp) {
    return [sync_warp](EmulatedThread& thread, auto floats) {
      const int lane = lane_of(thread);
      floats[lane] = 1.0f;
      const float total = warp_sum(thread, 1.0f);
      if (sync_warp) thread.sync_warp();
      floats[32 + lane] = total + read(floats[(lane + 1) % 32]);
    };
  };
  expect_error(32, {"(read after write)", "a shuffle orders no memory"}, neighbours(false));
  run(32, neighbours(true));  // __syncwarp orders the lanes' accesses
  // Lane 1 writes the word lane 0 read before the shuffle.
  expect_error(32, {"(write after read)", "thread 1 (warp 0, lane 1) after thread 0"},
               [](EmulatedThread& thread, auto floats) {
                 const int lane = lane_of(thread);
                 if (lane == 0) floats[lane] = read(floats[1]);
                 warp_sum(thread, 1.0f);
                 if (lane == 1) floats[1] = 2.0f;
               });
}

TEST_P(KernelEmulator, WarpsOrderedOnlyByASyncwarpRace) {
  expect_error(64,
               {"(read after write)", "thread 3 (warp 0, lane 3) after thread 40", "__syncthreads"},
               [](EmulatedThread& thread, auto floats) {
                 const unsigned t = thread.thread_index().x;
                 if (t == 40) floats[3] = 1.0f;
                 thread.sync_warp();
                 if (t == 3) floats[4] = read(floats[3]);
               });
  // Every thread reads word 0; thread 0's write is ordered after its own warp's reads only.
  expect_error(64, {"(write after read)", "thread 0 (warp 0, lane 0) after thread", "(warp 1,"},
               [](EmulatedThread& thread, auto floats) {
                 static_cast<void>(read(floats[0]));
                 thread.sync_warp();
                 if (thread.thread_index().x == 0) floats[0] = 1.0f;
               });
  expect_error(64, {"(write after write)"}, [](EmulatedThread& thread, auto floats) {
    if (thread.thread_index().x % 32 == 0) floats[7] = 1.0f;  // the same value still races
  });
}

TEST_P(KernelEmulator, BarriersOrderTheSameAccesses) {
  // Every thread reads every word; a tree reduction, a barrier between its rounds; each thread's
  // own read-modify-write.
  std::vector<float> results(65);
  run(64, [&](EmulatedThread& thread, auto floats) {
    const unsigned t = thread.thread_index().x;
    floats[t] = 1.0f;
    thread.sync_block();
    float total = 0.0f;
    for (int i = 0; i < 64; ++i) total += floats[i];
    results[t] = total;
    thread.sync_block();
    for (unsigned step = 32; step > 0; step /= 2) {
      if (t < step) floats[t] += read(floats[t + step]);
      thread.sync_block();
    }
    floats[t] += 1.0f;
    if (t == 0) results[64] = floats[0];
  });
  std::vector<float> expected(65, 64.0f);
  expected[64] = 65.0f;
  EXPECT_EQ(results, expected);
  // A block's accesses do not race with the previous block's.
  LaunchConfig two = linear_launch(2, 32);
  two.dynamic_shared_bytes = sizeof(float);
  emulation::run_grid(two, GetParam(), 0, [&](EmulatedThread& thread, void* shared) {
    const auto word = thread.shared(static_cast<float*>(shared));
    if (thread.thread_index().x == thread.block_index().x) word[0] = 1.0f;
  });
}

INSTANTIATE_TEST_SUITE_P(Orders, KernelEmulator,
                         ::testing::Values(Order::kForward, Order::kReverse),
                         [](const ::testing::TestParamInfo<Order>& param) {
                           return param.param == Order::kForward ? "ForwardThreadOrder"
                                                                 : "ReverseThreadOrder";
                         });

}  // namespace
}  // namespace zero::kernels
