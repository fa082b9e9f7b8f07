// The Gloo communicator at 2 and 4 ranks, started by tests/comm/launch_ranks (environment set by
// hand as torchrun or srun would) or by torchrun itself: make_communicator must pick Gloo, and
// every op × dtype × size must match the serial reference, as for MPI.
#include <gtest/gtest.h>

#include <cstdlib>

#include "collective_checks.h"
#include "zero/comm/communicator.h"
#include "zero/core/error.h"
#include "zero/core/launch.h"

namespace zero {
namespace {

Communicator& world() {
  static std::unique_ptr<Communicator> communicator = make_communicator(DeviceKind::kCpu);
  return *communicator;
}

TEST(GlooCommunicator, KnowsItsPlace) {
  const LaunchInfo launch = detect_launch();
  if (const char* expected = std::getenv("ZERO_TEST_LAUNCHER")) {
    EXPECT_EQ(name_of(launch.launcher), expected);
  }
  ASSERT_GT(launch.world_size, 1) << "run under launch_ranks or torchrun";
  EXPECT_EQ(world().backend(), "gloo");
  EXPECT_EQ(world().rank(), launch.rank);
  EXPECT_EQ(world().world_size(), launch.world_size);
}

TEST(GlooCommunicator, EveryCollectiveMatchesReference) {
  testing::check_every_collective(world());
}

TEST(GlooCommunicator, RandomFloatAllReduceIsCloseToSerialSum) {
  testing::check_random_float_average(world());
}

TEST(GlooCommunicator, ManySmallCollectivesKeepOrder) {
  testing::check_many_small_collectives_keep_order(world());
}

TEST(GlooCommunicator, LabelsTellSameShapedCallsApartOnEveryRank) {
  testing::check_labels_tell_calls_apart([] { return make_communicator(DeviceKind::kCpu); },
                                         world());
}

}  // namespace
}  // namespace zero
