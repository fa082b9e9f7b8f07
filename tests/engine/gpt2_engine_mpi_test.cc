// GPT-2 through the engine under mpirun (2 and 4 ranks): stages 1 and 3 with and without
// accumulation reproduce, for 10 steps, the single-process stage-0 run each rank computes itself.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "gpt2_engine_driver.h"

namespace zero::testing {
namespace {

GPT2Run mpi_run(int stage, int accumulation) {
  GPT2Run run;
  run.options = gpt2_parity_options(stage, accumulation);
  run.steps = 10;
  return run;
}

const TrainResult& reference() {
  static const TrainResult result = [] {
    std::unique_ptr<Communicator> local = make_local_communicator();
    return train_gpt2(*local, mpi_run(0, 1));
  }();
  return result;
}

class MpiStageAccumulation : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(MpiStageAccumulation, MatchesSingleProcessStageZero) {
  const auto [stage, accumulation] = GetParam();
  const TrainResult& expected = reference();
  std::unique_ptr<Communicator> comm = make_mpi_communicator();
  const TrainResult result = train_gpt2(*comm, mpi_run(stage, accumulation));
  ASSERT_EQ(expected.losses.size(), 10u);
  ASSERT_EQ(result.losses.size(), expected.losses.size());
  double loss_deviation = 0.0, param_deviation = 0.0;
  for (std::size_t s = 0; s < expected.losses.size(); ++s) {
    EXPECT_NEAR(result.losses[s], expected.losses[s], 1e-5) << "step " << s;
    loss_deviation = std::max(loss_deviation, std::abs(result.losses[s] - expected.losses[s]));
  }
  ASSERT_EQ(result.params.size(), expected.params.size());
  for (std::size_t u = 0; u < expected.params.size(); ++u) {
    ASSERT_EQ(result.params[u].size(), expected.params[u].size()) << "unit " << u;
    double diff = 0.0, norm = 0.0;
    for (std::size_t i = 0; i < expected.params[u].size(); ++i) {
      diff += std::pow(double(result.params[u][i]) - expected.params[u][i], 2);
      norm += std::pow(double(expected.params[u][i]), 2);
    }
    const double deviation = std::sqrt(diff / norm);
    EXPECT_LT(deviation, 1e-5) << "unit " << u;
    param_deviation = std::max(param_deviation, deviation);
  }
  if (comm->rank() == 0)
    std::printf("world %d stage %d gas %d: max |loss - ref| %.2e, max unit relative %.2e\n",
                comm->world_size(), stage, accumulation, loss_deviation, param_deviation);
}

INSTANTIATE_TEST_SUITE_P(All, MpiStageAccumulation,
                         ::testing::Combine(::testing::Values(1, 3), ::testing::Values(1, 3)));

}  // namespace
}  // namespace zero::testing
