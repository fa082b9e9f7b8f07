// checkpoint::validate (zero/checkpoint/checkpoint_validation.h) and the load's own checks on
// damaged folders: truncated, missing and corrupt shard files are refused naming the file, and at
// world 2 no rank is left waiting in a collective.
#include <gtest/gtest.h>

#include <fstream>

#include "checkpoint_test_util.h"

namespace zero::testing {
namespace {

TEST(CheckpointValidation, DamagedFoldersAreRefusedNamingTheFile) {
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

}  // namespace
}  // namespace zero::testing
