// Reading a checkpoint at any world size and stage: each reader copies the pieces of the shard
// files whose global ranges intersect the range it wants (an engine rank its shards, consolidation
// whole units).
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "zero/checkpoint/checkpoint_index.h"
#include "zero/checkpoint/safetensors.h"
#include "zero/engine/engine.h"

namespace zero::checkpoint {

// Loads the checkpoint in `folder` into the engine (all ranks, any world size or stage): checks
// the units (names, sizes) and optimizer states against the engine's, validates the files this
// rank reads (size and checksum), copies the pieces that intersect this rank's shards, sets the
// TrainingState, and refreshes the compute parameters. Returns the index. Throws zero::Error
// naming the mismatch or the bad file; every rank checks the same index, so all ranks throw.
CheckpointIndex load(Engine& engine, const std::filesystem::path& folder);

// Whole units read one at a time from a checkpoint's shard files (no engine, no communicator):
// each file is checked (size, checksum, header against the index) the first time a unit needs
// it, keeping only its header; a unit's pieces are then read from the files (pread), so memory is
// the unit asked for. What `zero checkpoint consolidate` streams with.
class UnitReader {
 public:
  UnitReader(std::filesystem::path folder, CheckpointIndex index);
  ~UnitReader();
  UnitReader(UnitReader&&) noexcept;
  UnitReader& operator=(UnitReader&&) noexcept;

  const CheckpointIndex& index() const { return index_; }
  std::size_t num_elements(const std::string& unit) const;  // throws for an unknown unit
  // Unit `unit`'s `state` ("params" or an optimizer state's name) into `out`
  // (num_elements(unit) values). Throws naming the unit unless the files cover it exactly once.
  void read(const std::string& unit, const std::string& state, std::span<float> out);
  std::vector<float> read(const std::string& unit, const std::string& state = "params");

 private:
  std::filesystem::path folder_;
  CheckpointIndex index_;
  std::vector<std::unique_ptr<SafetensorsReader>> readers_;  // per index file, once opened
};

// A whole unit's fp32 master values from the shard files (no engine, no communicator): what
// `zero checkpoint consolidate` writes. `state` "params" or an optimizer state's name.
std::vector<float> read_unit(const std::filesystem::path& folder, const CheckpointIndex& index,
                             const std::string& unit, const std::string& state = "params");
// Every unit at once, each file read once (checked: size, checksum, header): unit → values.
std::map<std::string, std::vector<float>> read_units(const std::filesystem::path& folder,
                                                     const CheckpointIndex& index,
                                                     const std::string& state = "params");

}  // namespace zero::checkpoint
