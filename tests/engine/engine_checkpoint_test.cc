// Checkpoint state: shards read at stage 3 / world 4 and written at stage 1 / world 2 continue
// the run exactly as an uninterrupted one; Lamb and SGD keep stage parity too.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <mutex>

#include "test_model.h"
#include "zero/comm/thread_communicator.h"

namespace zero::testing {
namespace {

// Global (unit → flat values) images of parameters and optimizer states.
struct Snapshot {
  std::map<std::string, std::vector<float>> params;
  std::map<std::string, std::map<std::string, std::vector<float>>> states;
  TrainingState training;
};

void train_steps(Engine& engine, TinyStack& model, Communicator& comm, int first, int count) {
  const int rows = 24 / comm.world_size();
  for (int step = first; step < first + count; ++step) {
    model.micro_step(engine, make_batch({}, step, comm.rank() * rows, rows));
    engine.step();
  }
}

TEST(EngineCheckpoint, ResumeAtAnotherStageAndWorldSize) {
  TrainResult uninterrupted;
  run_ranks(2, [&](Communicator& comm) {
    TrainResult result = train_stack(comm, parity_options(1, 1), 6, 24);
    if (comm.rank() == 0) uninterrupted = result;
  });

  Snapshot snapshot;
  std::mutex mutex;
  run_ranks(4, [&](Communicator& comm) {
    std::unique_ptr<Engine> engine = make_engine(parity_options(3, 1), comm);
    TinyStack model;
    model.register_units(*engine);
    train_steps(*engine, model, comm, 0, 3);
    std::lock_guard lock(mutex);
    for (const ShardState& shard : engine->shard_states()) {
      auto& params = snapshot.params[shard.unit];
      const std::size_t size = engine->layout(engine->unit(shard.unit)).num_elements();
      params.resize(size);
      std::copy(shard.params.begin(), shard.params.end(), params.begin() + shard.range.begin);
      for (const auto& [name, values] : shard.optimizer_state) {
        auto& state = snapshot.states[shard.unit][name];
        state.resize(size);
        std::copy(values.begin(), values.end(), state.begin() + shard.range.begin);
      }
    }
    snapshot.training = engine->training_state();
  });

  TrainResult resumed;
  run_ranks(2, [&](Communicator& comm) {
    std::unique_ptr<Engine> engine = make_engine(parity_options(1, 1), comm);
    TinyStack model;
    model.register_units(*engine);
    for (ShardState& shard : engine->shard_states()) {
      const auto& params = snapshot.params.at(shard.unit);
      std::copy(params.begin() + shard.range.begin, params.begin() + shard.range.end,
                shard.params.begin());
      for (auto& [name, values] : shard.optimizer_state) {
        const auto& state = snapshot.states.at(shard.unit).at(name);
        std::copy(state.begin() + shard.range.begin, state.begin() + shard.range.end,
                  values.begin());
      }
    }
    engine->set_training_state(snapshot.training);
    engine->refresh_params();
    train_steps(*engine, model, comm, 3, 3);
    std::vector<std::vector<float>> params = gathered_parameters(*engine);
    if (comm.rank() == 0) resumed.params = std::move(params);
  });
  for (std::size_t u = 0; u < uninterrupted.params.size(); ++u)
    for (std::size_t i = 0; i < uninterrupted.params[u].size(); ++i)
      ASSERT_NEAR(resumed.params[u][i], uninterrupted.params[u][i],
                  1e-5 * (1 + std::fabs(uninterrupted.params[u][i])))
          << "unit " << u << " element " << i;
}

class OtherOptimizers : public ::testing::TestWithParam<std::string> {};

TEST_P(OtherOptimizers, StageThreeWorldFourMatchesStageZeroWorldOne) {
  auto options_for = [](int stage) {
    EngineOptions options = parity_options(stage, 1);
    options.optimizer.type = config::optimizer_type_from_name(GetParam());
    options.optimizer.momentum = 0.9;
    options.optimizer.lr = 1e-2;
    options.scheduler = config::SchedulerConfig{};
    return options;
  };
  TrainResult expected, actual;
  run_ranks(1, [&](Communicator& comm) { expected = train_stack(comm, options_for(0), 10, 24); });
  run_ranks(4, [&](Communicator& comm) {
    TrainResult result = train_stack(comm, options_for(3), 10, 24);
    if (comm.rank() == 0) actual = result;
  });
  for (std::size_t s = 0; s < expected.losses.size(); ++s)
    EXPECT_NEAR(actual.losses[s], expected.losses[s], 1e-5) << GetParam() << " step " << s;
  EXPECT_LT(expected.losses.back(), expected.losses.front()) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(All, OtherOptimizers, ::testing::Values("Lamb", "SGD", "Adam"));

}  // namespace
}  // namespace zero::testing
