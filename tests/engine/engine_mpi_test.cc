// Parity under mpirun (2 and 4 ranks): every stage with and without accumulation reproduces the
// single-process stage-0 run; a rank gathering another unit fails with the unit named.
#include <gtest/gtest.h>

#include <cmath>

#include "test_model.h"

namespace zero::testing {
namespace {

constexpr int kSteps = 20;
constexpr int kGlobalBatch = 24;

const TrainResult& reference() {
  static const TrainResult result = [] {
    std::unique_ptr<Communicator> local = make_local_communicator();
    return train_stack(*local, parity_options(0, 1), kSteps, kGlobalBatch);
  }();
  return result;
}

class MpiStageAccumulation : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(MpiStageAccumulation, MatchesSingleProcessStageZero) {
  const auto [stage, accumulation] = GetParam();
  std::unique_ptr<Communicator> comm = make_mpi_communicator();
  const TrainResult result =
      train_stack(*comm, parity_options(stage, accumulation), kSteps, kGlobalBatch);
  const TrainResult& expected = reference();
  ASSERT_EQ(expected.losses.size(), static_cast<std::size_t>(kSteps));
  ASSERT_EQ(result.losses.size(), expected.losses.size());
  for (int s = 0; s < kSteps; ++s)
    EXPECT_NEAR(result.losses[s], expected.losses[s], 1e-5) << "step " << s;
  ASSERT_EQ(result.params.size(), expected.params.size());
  for (std::size_t u = 0; u < expected.params.size(); ++u) {
    ASSERT_EQ(result.params[u].size(), expected.params[u].size()) << "unit " << u;
    double diff = 0.0, norm = 0.0;
    for (std::size_t i = 0; i < expected.params[u].size(); ++i) {
      diff += std::pow(double(result.params[u][i]) - expected.params[u][i], 2);
      norm += std::pow(double(expected.params[u][i]), 2);
    }
    EXPECT_LT(std::sqrt(diff / norm), 1e-5) << "unit " << u;
  }
}

INSTANTIATE_TEST_SUITE_P(All, MpiStageAccumulation,
                         ::testing::Combine(::testing::Values(0, 1, 2, 3),
                                            ::testing::Values(1, 3)));

// Last: the failed communicator is abandoned, the job goes on with fresh ones.
TEST(MpiDivergence, RankGatheringAnotherUnitIsNamed) {
  std::unique_ptr<Communicator> comm = make_mpi_communicator();
  EngineOptions options = parity_options(3, 1);
  options.param_persistence_threshold = 0;
  std::unique_ptr<Engine> engine = make_engine(options, *comm);
  TinyStack model;
  model.register_units(*engine);
  engine->initialize();
  std::string message = "no error";
  try {
    GatheredUnit unit = engine->gather(engine->unit(comm->rank() == 1 ? "block.2" : "block.1"));
  } catch (const Error& error) {
    message = error.what();
  }
  EXPECT_NE(message.find("ranks disagree on collective"), std::string::npos) << message;
  EXPECT_NE(message.find("rank 1 called"), std::string::npos) << message;
  EXPECT_NE(message.find("'gather block.2'"), std::string::npos) << message;
  EXPECT_NE(message.find("'gather block.1'"), std::string::npos) << message;
  engine.reset();
  comm.reset();
}

}  // namespace
}  // namespace zero::testing
