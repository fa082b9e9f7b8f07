// checkpoint::load and read_unit(s) (zero/checkpoint/resharding_load.h) on the tiny engine stack
// over thread ranks: written at one world/stage and read at another, the run continues as an
// uninterrupted one; consolidated units equal the gathered parameters; another model is refused
// naming the unit.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "checkpoint_test_util.h"

namespace zero::testing {
namespace {

TEST(ReshardingLoad, ResumesAtAnotherWorldAndStage) {
  TrainResult uninterrupted;
  run_ranks(1, [&](Communicator& comm) {
    uninterrupted = train_stack(comm, parity_options(0, 1), 6, 24);
  });
  for (const auto& [save_stage, save_world, load_stage, load_world] :
       std::vector<std::tuple<int, int, int, int>>{
           {3, 4, 1, 2}, {0, 2, 3, 4}, {2, 3, 0, 1}, {1, 1, 2, 4}}) {
    SCOPED_TRACE("saved at stage " + std::to_string(save_stage) + " world " +
                 std::to_string(save_world) + ", loaded at stage " + std::to_string(load_stage) +
                 " world " + std::to_string(load_world));
    const fs::path root = scratch("resume");
    train_and_save(root, save_stage, save_world, 3);
    const checkpoint::CheckpointIndex index = checkpoint::read_index(root / "checkpoint-3");
    EXPECT_EQ(index.world_size, save_world);
    EXPECT_EQ(index.stage, save_stage);
    EXPECT_EQ(index.training.global_steps, 3);
    EXPECT_NO_THROW(checkpoint::validate(root / "checkpoint-3", index));
    EXPECT_EQ(checkpoint::resolve(root), root / "checkpoint-3");
    TrainResult resumed;
    run_ranks(load_world, [&](Communicator& comm) {
      std::unique_ptr<Engine> engine = make_engine(parity_options(load_stage, 1), comm);
      TinyStack model;
      model.register_units(*engine);
      checkpoint::load(*engine, checkpoint::resolve(root));
      EXPECT_EQ(engine->global_steps(), 3);
      train_range(*engine, model, comm, 3, 3);
      std::vector<std::vector<float>> params = gathered_parameters(*engine);
      if (comm.rank() == 0) resumed.params = std::move(params);
    });
    ASSERT_EQ(resumed.params.size(), uninterrupted.params.size());
    for (std::size_t u = 0; u < uninterrupted.params.size(); ++u)
      for (std::size_t i = 0; i < uninterrupted.params[u].size(); ++i)
        ASSERT_NEAR(resumed.params[u][i], uninterrupted.params[u][i],
                    1e-5 * (1 + std::fabs(uninterrupted.params[u][i])))
            << "unit " << u << " element " << i;
    fs::remove_all(root);
  }
}

// The consolidated unit equals the parameters gathered from the engine that saved it.
TEST(ReshardingLoad, ReadUnitWithoutTheWorld) {
  const fs::path root = scratch("read_unit");
  std::vector<std::vector<float>> expected;
  std::vector<std::string> names;
  run_ranks(3, [&](Communicator& comm) {
    std::unique_ptr<Engine> engine = make_engine(parity_options(3, 1), comm);
    TinyStack model;
    model.register_units(*engine);
    train_range(*engine, model, comm, 0, 2);
    std::vector<std::vector<float>> params = gathered_parameters(*engine);
    checkpoint::CheckpointSave save(comm, root, "checkpoint-2");
    save.write_engine(*engine);
    save.commit();
    if (comm.rank() == 0) {
      expected = std::move(params);
      for (UnitId u = 0; u < static_cast<UnitId>(engine->num_units()); ++u)
        names.push_back(engine->unit_name(u));
    }
  });
  const fs::path folder = root / "checkpoint-2";
  const checkpoint::CheckpointIndex index = checkpoint::read_index(folder);
  const std::map<std::string, std::vector<float>> all = checkpoint::read_units(folder, index);
  ASSERT_EQ(all.size(), names.size());
  for (std::size_t u = 0; u < names.size(); ++u) {
    const std::vector<float> values = checkpoint::read_unit(folder, index, names[u]);
    EXPECT_EQ(all.at(names[u]), values) << names[u];
    ASSERT_EQ(values.size(), index.units[u].num_elements);
    for (std::size_t i = 0; i < values.size(); ++i)
      ASSERT_EQ(values[i], expected[u][i]) << names[u] << " element " << i;
  }
  fs::remove_all(root);
}

TEST(ReshardingLoad, AnotherModelIsRefusedNamingTheUnit) {
  const fs::path root = scratch("other_model");
  train_and_save(root, 1, 2, 1);
  StackShape wider;
  wider.hidden = 20;
  const std::string message = message_of([&] {
    run_ranks(2, [&](Communicator& comm) {
      std::unique_ptr<Engine> engine = make_engine(parity_options(1, 1), comm);
      TinyStack model(wider);
      model.register_units(*engine);
      checkpoint::load(*engine, root / "checkpoint-1");
    });
  });
  EXPECT_NE(message.find("elements, this model's has"), std::string::npos) << message;
  EXPECT_NE(message.find("unit '"), std::string::npos) << message;
  fs::remove_all(root);
}

}  // namespace
}  // namespace zero::testing
