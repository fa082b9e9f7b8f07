// zero/checkpoint/zero_checkpoint.h on the tiny engine stack over thread ranks: written at one
// world/stage and read at another, the run continues as an uninterrupted one; damaged folders are
// refused naming the file; the commit and rotation rules.
#include "zero/checkpoint/zero_checkpoint.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>

#include "../engine/test_model.h"
#include "zero/comm/thread_communicator.h"

namespace zero::testing {
namespace {

namespace fs = std::filesystem;

fs::path scratch(const std::string& name) {
  const fs::path path = fs::temp_directory_path() /
                        ("zero_checkpoint_test_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(path);
  fs::create_directories(path);
  return path;
}

void train_range(Engine& engine, TinyStack& model, Communicator& comm, int first, int count) {
  const int rows = 24 / comm.world_size();
  for (int step = first; step < first + count; ++step) {
    model.micro_step(engine, make_batch({}, step, comm.rank() * rows, rows));
    engine.step();
  }
}

// Trains `steps` at (stage, world) and saves root/checkpoint-<steps>.
void train_and_save(const fs::path& root, int stage, int world, int steps) {
  run_ranks(world, [&](Communicator& comm) {
    std::unique_ptr<Engine> engine = make_engine(parity_options(stage, 1), comm);
    TinyStack model;
    model.register_units(*engine);
    train_range(*engine, model, comm, 0, steps);
    checkpoint::CheckpointSave save(comm, root, "checkpoint-" + std::to_string(steps));
    save.write_engine(*engine);
    save.commit();
  });
}

TEST(ZeroCheckpoint, ResumesAtAnotherWorldAndStage) {
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
TEST(ZeroCheckpoint, ReadUnitWithoutTheWorld) {
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

std::string message_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

TEST(ZeroCheckpoint, DamagedFoldersAreRefusedNamingTheFile) {
  const fs::path root = scratch("damaged");
  train_and_save(root, 2, 2, 1);
  const fs::path folder = root / "checkpoint-1";
  const fs::path shard = folder / checkpoint::shard_file_name(1, 2);
  const checkpoint::CheckpointIndex index = checkpoint::read_index(folder);
  const std::uintmax_t size = fs::file_size(shard);
  auto load_at = [&](int world) {
    return message_of([&] {
      run_ranks(world, [&](Communicator& comm) {
        std::unique_ptr<Engine> engine = make_engine(parity_options(1, 1), comm);
        TinyStack model;
        model.register_units(*engine);
        checkpoint::load(*engine, folder);
      });
    });
  };

  fs::copy_file(shard, root / "good");
  fs::resize_file(shard, size - 100);  // truncated
  EXPECT_NE(message_of([&] { checkpoint::validate(folder, index); }).find(shard.string()),
            std::string::npos);
  EXPECT_NE(message_of([&] { checkpoint::validate(folder, index); }).find("truncated"),
            std::string::npos);
  EXPECT_NE(load_at(2).find(shard.string()), std::string::npos);
  EXPECT_NE(load_at(1).find("truncated"), std::string::npos);

  fs::remove(shard);  // missing
  EXPECT_NE(message_of([&] {
              checkpoint::validate(folder, index);
            }).find(shard.string() + " (rank 1) is missing"),
            std::string::npos);
  EXPECT_NE(load_at(2).find("is missing"), std::string::npos);

  fs::copy_file(root / "good", shard);
  EXPECT_NO_THROW(checkpoint::validate(folder, index));
  {  // one flipped byte in the data: same size, another checksum
    std::fstream stream(shard, std::ios::in | std::ios::out | std::ios::binary);
    stream.seekp(static_cast<std::streamoff>(size - 9));
    char byte = 0;
    stream.read(&byte, 1);
    stream.seekp(static_cast<std::streamoff>(size - 9));
    byte = static_cast<char>(byte ^ 0x40);
    stream.write(&byte, 1);
  }
  const std::string corrupt = message_of([&] { checkpoint::validate(folder, index); });
  EXPECT_NE(corrupt.find(shard.string()), std::string::npos) << corrupt;
  EXPECT_NE(corrupt.find("checksum"), std::string::npos) << corrupt;
  EXPECT_NE(load_at(1).find("checksum"), std::string::npos);
  // At world 2 only rank 1 reads that file: it names it, rank 0 says another rank failed
  // (whichever run_ranks rethrows), and neither waits in a collective.
  const std::string world_two = load_at(2);
  EXPECT_TRUE(world_two.find(shard.string()) != std::string::npos ||
              world_two.find("another rank could not read") != std::string::npos)
      << world_two;
  fs::remove_all(root);
}

TEST(ZeroCheckpoint, AnotherModelIsRefusedNamingTheUnit) {
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

TEST(ZeroCheckpoint, CommitRotationAndLatest) {
  const fs::path root = scratch("rotate");
  for (int steps : {1, 2, 3}) train_and_save(root, 1, 2, steps);
  EXPECT_EQ(checkpoint::resolve(root), root / "checkpoint-3");
  {
    std::ifstream latest(root / "latest");
    std::string tag;
    latest >> tag;
    EXPECT_EQ(tag, "checkpoint-3");
  }
  // An interrupted save: a staging folder with a shard and no commit. Not resolved, cleaned by
  // rotation.
  fs::create_directories(root / ".tmp-checkpoint-4");
  std::ofstream(root / ".tmp-checkpoint-4" / checkpoint::shard_file_name(0, 2)) << "partial";
  EXPECT_EQ(checkpoint::resolve(root), root / "checkpoint-3");
  checkpoint::rotate(root, "checkpoint-", 2);
  EXPECT_FALSE(fs::exists(root / ".tmp-checkpoint-4"));
  EXPECT_FALSE(fs::exists(root / "checkpoint-1"));
  EXPECT_TRUE(fs::exists(root / "checkpoint-2"));
  EXPECT_TRUE(fs::exists(root / "checkpoint-3"));
  // keep 1 with `latest` naming an older one: both the newest and latest's stay.
  checkpoint::write_file_atomically(root / "latest", "checkpoint-2\n");
  checkpoint::rotate(root, "checkpoint-", 1);
  EXPECT_TRUE(fs::exists(root / "checkpoint-2"));
  EXPECT_TRUE(fs::exists(root / "checkpoint-3"));
  // `latest` naming a folder that is gone is an error naming it, not a silent fallback.
  checkpoint::write_file_atomically(root / "latest", "checkpoint-9\n");
  EXPECT_NE(message_of([&] { checkpoint::resolve(root); }).find("checkpoint-9"), std::string::npos);
  // Saving the same tag again replaces it whole.
  checkpoint::write_file_atomically(root / "latest", "checkpoint-3\n");
  train_and_save(root, 3, 4, 3);
  EXPECT_EQ(checkpoint::read_index(root / "checkpoint-3").world_size, 4);
  EXPECT_NO_THROW(
      checkpoint::validate(root / "checkpoint-3", checkpoint::read_index(root / "checkpoint-3")));
  fs::remove_all(root);
}

}  // namespace
}  // namespace zero::testing
