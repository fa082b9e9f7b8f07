// Checks that a checkpoint folder is complete and undamaged before anything reads it, naming the
// file and what is wrong.
#pragma once

#include <filesystem>

#include "zero/checkpoint/checkpoint_index.h"

namespace zero::checkpoint {

// Cheap checks that read no shard data: units unique, each one's ranges over the files cover
// [0, num_elements) exactly once, every file present with its recorded size. Throws zero::Error
// naming the file and what is wrong.
void check_complete(const std::filesystem::path& folder, const CheckpointIndex& index);

// Checks the folder is a complete checkpoint: the index parses; units are unique and each one's
// ranges over the files cover [0, num_elements) exactly once; every file is present with the
// recorded size and checksum (when `checksums`) and its safetensors header holds the tensors and
// ranges the index lists. Throws zero::Error naming the file and what is wrong.
void validate(const std::filesystem::path& folder, const CheckpointIndex& index,
              bool checksums = true);

}  // namespace zero::checkpoint
