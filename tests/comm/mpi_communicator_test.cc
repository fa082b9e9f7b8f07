// The MPI communicator at 2 and 4 ranks: every op × dtype × size against the serial reference.
#include <gtest/gtest.h>

#include "collective_checks.h"
#include "zero/comm/communicator.h"
#include "zero/core/error.h"
#include "zero/core/launch.h"

namespace zero {
namespace {

Communicator& world() {
  static std::unique_ptr<Communicator> communicator = make_mpi_communicator();
  return *communicator;
}

TEST(MpiCommunicator, KnowsItsPlace) {
  const LaunchInfo launch = detect_launch();
  EXPECT_EQ(launch.launcher, Launcher::kOpenMpi);
  EXPECT_EQ(world().rank(), launch.rank);
  EXPECT_EQ(world().world_size(), launch.world_size);
  EXPECT_EQ(world().backend(), "mpi");
}

TEST(MpiCommunicator, EveryCollectiveMatchesReference) { testing::check_every_collective(world()); }

TEST(MpiCommunicator, RandomFloatAllReduceIsCloseToSerialSum) {
  testing::check_random_float_average(world());
}

TEST(MpiCommunicator, ManySmallCollectivesKeepOrder) {
  testing::check_many_small_collectives_keep_order(world());
}

TEST(MpiCommunicator, LabelsTellSameShapedCallsApartOnEveryRank) {
  testing::check_labels_tell_calls_apart([] { return make_mpi_communicator(); }, world());
}

}  // namespace
}  // namespace zero
