// zero_checkpoint.json and its parts (zero/checkpoint/checkpoint_index.h): shard file names, the
// FNV-1a checksum over 8-byte words, the index a save writes read back, and indexes of another
// format or version refused naming the file.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <vector>

#include "checkpoint_test_util.h"

namespace zero::testing {
namespace {

TEST(CheckpointIndex, ShardFileNamesCountRanksFromZero) {
  EXPECT_EQ(checkpoint::shard_file_name(1, 4), "zero_shard-00001-of-00004.safetensors");
  EXPECT_EQ(checkpoint::shard_file_name(0, 1), "zero_shard-00000-of-00001.safetensors");
}

TEST(CheckpointIndex, ChecksumIsFnv1aOverEightByteWordsThenTheTail) {
  constexpr std::uint64_t kOffset = 0xcbf29ce484222325ull, kPrime = 0x100000001b3ull;
  const unsigned char bytes[11] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  std::uint64_t word = 0;
  std::memcpy(&word, bytes, 8);
  std::uint64_t expected = (kOffset ^ word) * kPrime;
  for (int i = 8; i < 11; ++i) expected = (expected ^ bytes[i]) * kPrime;
  EXPECT_EQ(checkpoint::checksum_bytes(bytes, sizeof(bytes), kOffset), expected);
  // A file read in chunks sums as its bytes in one piece, across the 1 MiB chunk boundary too.
  const fs::path folder = scratch("checksum");
  std::vector<unsigned char> data((1 << 20) + 13);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<unsigned char>(i * 31 + 7);
  std::ofstream(folder / "file", std::ios::binary)
      .write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  EXPECT_EQ(checkpoint::file_checksum(folder / "file"),
            checkpoint::checksum_bytes(data.data(), data.size(), kOffset));
  fs::remove_all(folder);
}

TEST(CheckpointIndex, ReadsBackWhatTheSaveWrote) {
  const fs::path root = scratch("index");
  train_and_save(root, 2, 3, 2);
  const fs::path folder = root / "checkpoint-2";
  const checkpoint::CheckpointIndex index = checkpoint::read_index(folder);
  EXPECT_EQ(index.version, checkpoint::kFormatVersion);
  EXPECT_EQ(index.world_size, 3);
  EXPECT_EQ(index.stage, 2);
  EXPECT_EQ(index.param_dtype, "fp32");
  EXPECT_EQ(index.master_dtype, "fp32");
  EXPECT_EQ(index.optimizer_states, (std::vector<std::string>{"exp_avg", "exp_avg_sq"}));
  EXPECT_EQ(index.training.global_steps, 2);
  ASSERT_EQ(index.files.size(), 3u);
  for (int rank = 0; rank < 3; ++rank) {
    const checkpoint::ShardFileInfo& file = index.files[static_cast<std::size_t>(rank)];
    EXPECT_EQ(file.name, checkpoint::shard_file_name(rank, 3));
    EXPECT_EQ(file.rank, rank);
    EXPECT_EQ(file.size_bytes, fs::file_size(folder / file.name));
    EXPECT_EQ(file.checksum, checkpoint::file_checksum(folder / file.name));
  }
  for (const checkpoint::UnitInfo& unit : index.units) EXPECT_EQ(index.find_unit(unit.name), &unit);
  EXPECT_EQ(index.find_unit("no such unit"), nullptr);
  fs::remove_all(root);
}

TEST(CheckpointIndex, AnotherFormatOrVersionIsRefusedNamingTheFile) {
  const fs::path folder = scratch("index_format");
  const fs::path path = folder / checkpoint::kIndexFileName;
  std::string message = message_of([&] { checkpoint::read_index(folder); });
  EXPECT_NE(message.find("has no zero_checkpoint.json"), std::string::npos) << message;
  std::ofstream(path) << R"({"format": "deepspeed", "version": 1})";
  message = message_of([&] { checkpoint::read_index(folder); });
  EXPECT_NE(message.find(path.string() + R"(: "format" is not "zero-checkpoint")"),
            std::string::npos)
      << message;
  std::ofstream(path) << R"({"format": "zero-checkpoint", "version": 2})";
  message = message_of([&] { checkpoint::read_index(folder); });
  EXPECT_NE(message.find("format version 2 is not the version this build reads (1)"),
            std::string::npos)
      << message;
  std::ofstream(path) << R"({"format": "zero-checkpoint", "version": 1})";
  message = message_of([&] { checkpoint::read_index(folder); });
  EXPECT_NE(message.find("checkpoint index " + path.string() + " is not valid"), std::string::npos)
      << message;
  fs::remove_all(folder);
}

}  // namespace
}  // namespace zero::testing
