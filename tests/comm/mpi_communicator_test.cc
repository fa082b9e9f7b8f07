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
  constexpr std::size_t kCount = 4097;
  auto values_of = [](int rank) {
    std::vector<float> data(kCount);
    std::uint32_t state = 99u + rank;
    for (float& x : data) {
      state = state * 1664525u + 1013904223u;
      x = static_cast<float>(state >> 8) / (1 << 24) - 0.5f;
    }
    return data;
  };
  std::vector<float> data = values_of(world().rank());
  world().all_reduce(data.data(), data.data(), kCount, DType::kFloat32, ReduceOp::kAvg);
  world().synchronize();
  std::vector<double> expected(kCount, 0.0);
  for (int r = 0; r < world().world_size(); ++r) {
    const auto theirs = values_of(r);
    for (std::size_t i = 0; i < kCount; ++i)
      expected[i] += theirs[i] / static_cast<double>(world().world_size());
  }
  for (std::size_t i = 0; i < kCount; ++i) ASSERT_NEAR(data[i], expected[i], 1e-6) << i;
}

void ManySmallCollectivesKeepOrder_Check(Communicator& comm) {
  for (int i = 0; i < 200; ++i) {
    float x = static_cast<float>(comm.rank() + i);
    comm.all_reduce(&x, &x, 1, DType::kFloat32, ReduceOp::kMax);
    comm.synchronize();
    ASSERT_EQ(x, static_cast<float>(comm.world_size() - 1 + i));
  }
}

TEST(MpiCommunicator, ManySmallCollectivesKeepOrder) {
  ManySmallCollectivesKeepOrder_Check(world());
}

TEST(MpiCommunicator, LabelsTellSameShapedCallsApartOnEveryRank) {
  // Same op, count and dtype; the last rank's label differs. Every rank must fail in the call
  // check, before any data moves, with the groups of ranks and their labels; the job goes on.
  std::unique_ptr<Communicator> comm = make_mpi_communicator();
  const int last = comm->world_size() - 1;
  float x = 1.0f;
  comm->all_gather(&x, nullptr, 0, DType::kFloat32, "warm-up");
  comm->all_reduce(&x, &x, 1, DType::kFloat32, ReduceOp::kSum,
                   comm->rank() == last ? "gather h.2" : "gather h.1");
  std::string message = "no error";
  try {
    comm->synchronize();
  } catch (const Error& error) {
    message = error.what();
  }
  EXPECT_NE(message.find("ranks disagree on collective #2"), std::string::npos) << message;
  EXPECT_NE(message.find("rank " + std::to_string(last) +
                         " called #2 all_reduce(count=1, fp32, sum) 'gather h.2'"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("called #2 all_reduce(count=1, fp32, sum) 'gather h.1'"),
            std::string::npos)
      << message;
  EXPECT_EQ(x, 1.0f);  // the data collective never ran
  ManySmallCollectivesKeepOrder_Check(world());
}

}  // namespace
}  // namespace zero
