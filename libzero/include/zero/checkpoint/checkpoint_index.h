// zero_checkpoint.json, the index of a checkpoint folder: what wrote it (world, stage, dtypes,
// optimizer), the engine's TrainingState, the units, and per shard file its size, checksum and
// the global element range of each unit it holds. Also the file names and the checksum.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "zero/core/partition.h"
#include "zero/engine/engine.h"

namespace zero::checkpoint {

inline constexpr const char* kIndexFileName = "zero_checkpoint.json";
inline constexpr const char* kLatestFileName = "latest";
inline constexpr const char* kStagingPrefix = ".tmp-";
inline constexpr int kFormatVersion = 1;

// "zero_shard-00001-of-00004.safetensors": rank 1's shard of a world of 4.
std::string shard_file_name(int rank, int world_size);

struct UnitInfo {
  std::string name;
  std::size_t num_elements = 0;  // unpadded
};

struct ShardFileInfo {
  std::string name;  // file name inside the checkpoint folder
  int rank = 0;
  std::uint64_t size_bytes = 0;
  std::uint64_t checksum = 0;                  // file_checksum() of the whole file
  std::map<std::string, ElementRange> ranges;  // unit → global range held (non-empty only)
};

// zero_checkpoint.json.
struct CheckpointIndex {
  int version = kFormatVersion;
  int world_size = 1;  // what wrote it
  int stage = 0;
  std::string param_dtype = "fp32";   // compute copy (fp32, bf16, fp16)
  std::string master_dtype = "fp32";  // what the shard files hold
  std::string optimizer;              // DeepSpeed's name ("AdamW", ...)
  std::vector<std::string> optimizer_states;
  TrainingState training;
  std::vector<UnitInfo> units;
  std::vector<ShardFileInfo> files;

  const UnitInfo* find_unit(const std::string& name) const;
};

// The checksum stored for every file: 64-bit FNV-1a over the file's little-endian 8-byte words,
// then its tail bytes (fast, not cryptographic; catches truncation and corruption).
std::uint64_t checksum_bytes(const void* data, std::size_t size_bytes, std::uint64_t seed);
std::uint64_t file_checksum(const std::filesystem::path& path);

// Reads `folder`/zero_checkpoint.json; throws zero::Error naming the file and the bad field.
CheckpointIndex read_index(const std::filesystem::path& folder);

}  // namespace zero::checkpoint
