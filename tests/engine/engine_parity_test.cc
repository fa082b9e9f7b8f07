// Parity: every stage × world size × accumulation reproduces stage 0 / world 1 (fp32, 20 steps,
// AdamW + WarmupDecayLR + clipping) on the thread communicator.
#include <gtest/gtest.h>

#include <cmath>
#include <mutex>

#include "../common/relative_difference.h"
#include "test_model.h"
#include "zero/comm/thread_communicator.h"

namespace zero::testing {
namespace {

constexpr int kSteps = 20;
constexpr int kGlobalBatch = 24;

TrainResult run(int stage, int world, int accumulation, bool overlap = true, bool scatter = true,
                bool prescale = false, double predivide = 1.0) {
  TrainResult result;
  std::mutex mutex;
  EngineOptions options = parity_options(stage, accumulation);
  options.prescale_gradients = prescale;
  options.gradient_predivide_factor = predivide;
  options.overlap_comm = overlap;
  options.reduce_scatter = scatter;
  run_ranks(world, [&](Communicator& comm) {
    TrainResult mine = train_stack(comm, options, kSteps, kGlobalBatch);
    if (comm.rank() == 0) {
      std::lock_guard lock(mutex);
      result = std::move(mine);
    }
  });
  return result;
}

const TrainResult& reference() {
  static const TrainResult result = run(0, 1, 1);
  return result;
}

void expect_parity(const TrainResult& result, const std::string& what) {
  const TrainResult& expected = reference();
  ASSERT_EQ(result.losses.size(), expected.losses.size()) << what;
  for (std::size_t s = 0; s < expected.losses.size(); ++s)
    EXPECT_NEAR(result.losses[s], expected.losses[s], 1e-5) << what << " step " << s;
  ASSERT_EQ(result.params.size(), expected.params.size());
  for (std::size_t u = 0; u < expected.params.size(); ++u) {
    ASSERT_EQ(result.params[u].size(), expected.params[u].size());
    EXPECT_LT(relative_difference(result.params[u], expected.params[u]), 1e-5)
        << what << " unit " << u;
  }
}

TEST(EngineParity, ReferenceTrains) {
  const TrainResult& expected = reference();
  EXPECT_LT(expected.losses.back(), 0.8 * expected.losses.front());
  // Clipping was active at least once (the norm exceeded gradient_clipping = 0.5).
  bool clipped = false;
  for (double norm : expected.grad_norms) clipped = clipped || norm > 0.5;
  EXPECT_TRUE(clipped);
}

class StageWorldAccumulation : public ::testing::TestWithParam<std::tuple<int, int, int>> {};

TEST_P(StageWorldAccumulation, MatchesStageZeroWorldOne) {
  const auto [stage, world, accumulation] = GetParam();
  expect_parity(run(stage, world, accumulation), "stage " + std::to_string(stage) + " world " +
                                                     std::to_string(world) + " gas " +
                                                     std::to_string(accumulation));
}

INSTANTIATE_TEST_SUITE_P(All, StageWorldAccumulation,
                         ::testing::Combine(::testing::Values(0, 1, 2, 3),
                                            ::testing::Values(1, 2, 4), ::testing::Values(1, 3)));

TEST(EngineParity, WithoutOverlapAndWithAllReduceInsteadOfReduceScatter) {
  for (int stage : {1, 2, 3}) {
    expect_parity(run(stage, 4, 3, /*overlap=*/false),
                  "no overlap, stage " + std::to_string(stage));
    expect_parity(run(stage, 4, 1, true, /*scatter=*/false),
                  "all-reduce, stage " + std::to_string(stage));
  }
}

TEST(EngineParity, PrescaleAndPredivideKeepTheAverage) {
  expect_parity(run(2, 4, 3, true, true, /*prescale=*/true), "prescale_gradients");
  expect_parity(run(0, 4, 1, true, true, false, /*predivide=*/2.0), "predivide 2, stage 0");
  expect_parity(run(3, 2, 3, true, true, false, /*predivide=*/8.0), "predivide 8, stage 3");
}

TEST(EngineParity, OddWorldSizes) {
  for (int world : {3, 8})
    expect_parity(run(3, world, 1), "stage 3 world " + std::to_string(world));
}

}  // namespace
}  // namespace zero::testing
