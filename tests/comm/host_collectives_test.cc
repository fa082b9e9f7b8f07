// all_reduce_host / all_gather_host: the right values at worlds 1, 2 and 4, and the buffers the
// communicator receives are device memory, whether it takes device buffers (as NCCL does) or host
// ones over the CPU backend, checked by the checking communicator of the engine tests over a CPU
// context whose device space tracks its blocks. Where the device's memory is not the host's (a
// CUDA device beside an MPI communicator) the host pointers go through unchanged (and the checker,
// asked to expect device memory, sees them: the check can fail).
#include "zero/comm/host_collectives.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "../engine/checking_communicator.h"
#include "zero/comm/thread_communicator.h"
#include "zero/core/cpu_context.h"
#include "zero/core/device.h"

namespace zero {
namespace {

using testing::CheckingCommunicator;
using testing::ForwardingContext;
using testing::TrackingDeviceAllocator;
using testing::TrackingDeviceContext;

struct RankResult {
  std::vector<float> reduced, gathered;
  std::vector<std::string> violations;
  std::int64_t checked = 0;
};

// The CPU backend with a tracking device space, which the host can address or (as a CUDA
// device's) not.
class TrackedDevice final : public ForwardingContext {
 public:
  explicit TrackedDevice(bool addressable)
      : ForwardingContext(std::make_unique<TrackingDeviceContext>(CpuContextOptions{})),
        addressable_(addressable) {}
  bool host_addressable(MemorySpace space) const override {
    return ForwardingContext::host_addressable(space) &&
           (addressable_ || space != MemorySpace::kDevice);
  }
  const TrackingDeviceAllocator& device_allocator() {
    return static_cast<TrackingDeviceContext&>(inner()).device_allocator();
  }

 private:
  bool addressable_;
};

// Both collectives at `world` through a checking communicator that takes `buffers`, over a CPU
// context whose device memory the host can or cannot address.
std::vector<RankResult> run(int world, DeviceKind buffers, bool addressable = true) {
  std::vector<RankResult> results(static_cast<std::size_t>(world));
  run_ranks(world, [&](Communicator& inner) {
    TrackedDevice context(addressable);
    CheckingCommunicator checking(inner, context.device_allocator(), buffers);
    const int rank = inner.rank();
    RankResult& result = results[static_cast<std::size_t>(rank)];
    result.reduced = {static_cast<float>(rank), 1.0f, -static_cast<float>(rank)};
    all_reduce_host(checking, context, result.reduced, ReduceOp::kMax, "test max");
    const std::vector<float> send = {10.0f * static_cast<float>(rank), 0.5f};
    result.gathered.assign(send.size() * static_cast<std::size_t>(world), -1.0f);
    all_gather_host(checking, context, send, result.gathered, "test gather");
    result.violations = checking.violations();
    result.checked = checking.buffers_checked();
  });
  return results;
}

class HostCollectives : public ::testing::TestWithParam<int> {};

void expect_staged(const std::vector<RankResult>& results, int world) {
  for (const RankResult& result : results) {
    EXPECT_EQ(result.reduced, (std::vector<float>{static_cast<float>(world - 1), 1.0f, 0.0f}));
    std::vector<float> expected;
    for (int r = 0; r < world; ++r) expected.insert(expected.end(), {10.0f * r, 0.5f});
    EXPECT_EQ(result.gathered, expected);
    EXPECT_GT(result.checked, 0);
    EXPECT_TRUE(result.violations.empty()) << result.violations.front();
  }
}

TEST_P(HostCollectives, DeviceBuffersStageThroughTheDeviceAllocator) {
  expect_staged(run(GetParam(), DeviceKind::kCuda), GetParam());
}

TEST_P(HostCollectives, HostBuffersOverTheCpuBackendStageToo) {
  expect_staged(run(GetParam(), DeviceKind::kCpu), GetParam());
}

TEST_P(HostCollectives, HostBuffersBesideUnaddressableDeviceMemoryGoThroughUnstaged) {
  const int world = GetParam();
  for (const RankResult& result : run(world, DeviceKind::kCpu, /*addressable=*/false)) {
    EXPECT_EQ(result.reduced, (std::vector<float>{static_cast<float>(world - 1), 1.0f, 0.0f}));
    EXPECT_EQ(result.gathered.size(), 2u * static_cast<std::size_t>(world));
    EXPECT_FALSE(result.violations.empty());  // host pointers, as the communicator asked
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, HostCollectives, ::testing::Values(1, 2, 4));

TEST(HostCollectivesErrors, GatherNamesAWrongReceiveSize) {
  run_ranks(2, [](Communicator& communicator) {
    TrackingDeviceContext context(CpuContextOptions{});
    std::vector<float> send(3), recv(5);
    try {
      all_gather_host(communicator, context, send, recv, "bad sizes");
      ADD_FAILURE() << "expected an error";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("recv holds 5 values, expected 3 x 2"),
                std::string::npos)
          << error.what();
    }
  });
}

}  // namespace
}  // namespace zero
