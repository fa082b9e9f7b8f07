// Parity under mpirun (2 and 4 ranks): every stage with and without accumulation reproduces the
// single-process stage-0 run; a rank gathering another unit fails with the unit named.
#include <gtest/gtest.h>

#include <cmath>

#include "memory_swap_store.h"
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

// Offload under mpirun: optimizer cpu / nvme (in-memory swap store), with the parameters at
// stage 3, reproduce the same mpirun run without offload bit for bit.
TrainResult train_offloaded(Communicator& comm, int stage, config::OffloadDevice device,
                            bool params) {
  EngineOptions options = parity_options(stage, 1);
  if (device != config::OffloadDevice::kNone) {
    options.sub_group_size = 1000;
    options.offload_optimizer.device = device;
    options.offload_optimizer.nvme_path = "/mpi-offload-test";
    options.offload_optimizer.pin_memory = true;
    options.offload_optimizer.pipeline_read = true;
    if (params) {
      options.offload_param.device = device;
      options.offload_param.nvme_path = "/mpi-offload-test";
      options.offload_param.max_in_cpu = 200;
    }
  }
  std::unique_ptr<Engine> engine = make_engine(options, comm);
  engine->set_swap_store_factory(memory_swap_store_factory());
  TinyStack model;
  model.register_units(*engine);
  const int rows = kGlobalBatch / comm.world_size();
  return train_steps(comm, *engine, 8, rows, [&](int step, int first) {
    return model.micro_step(*engine, make_batch({}, step, first, rows));
  });
}

TEST(MpiOffload, MatchesTheRunWithoutOffloadBitwise) {
  using config::OffloadDevice;
  for (int stage : {1, 2, 3}) {
    std::unique_ptr<Communicator> comm = make_mpi_communicator();
    const TrainResult expected = train_offloaded(*comm, stage, OffloadDevice::kNone, false);
    for (OffloadDevice device : {OffloadDevice::kCpu, OffloadDevice::kNvme})
      for (bool params : {false, true}) {
        if (params && stage != 3) continue;
        const TrainResult result = train_offloaded(*comm, stage, device, params);
        const std::string what = "stage " + std::to_string(stage) + " " +
                                 std::string(config::name_of(device)) + (params ? " + params" : "");
        EXPECT_EQ(result.losses, expected.losses) << what;
        EXPECT_EQ(result.params, expected.params) << what;
      }
  }
}

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
