// One rank's shard file as the checkpoint sources read and write it: tensor and metadata names,
// the checks against its index entry, and copying a range out of it. Private to
// libzero/src/checkpoint.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>

#include "zero/checkpoint/checkpoint_index.h"
#include "zero/checkpoint/safetensors.h"
#include "zero/core/partition.h"

namespace zero::checkpoint {

// "<unit>/<state>": a unit's tensor in a shard file; state "params" or an optimizer state's name.
inline std::string tensor_name(const std::string& unit, const std::string& state) {
  return unit + "/" + state;
}

// "range.<unit>": the safetensors metadata key holding the unit's global range, "begin:end".
inline std::string range_key(const std::string& unit) { return "range." + unit; }

// One opened, validated shard file.
struct OpenedFile {
  const ShardFileInfo* info = nullptr;
  std::unique_ptr<SafetensorsReader> reader;
};

// Size and checksum against the index; throws naming the file.
void check_file(const std::filesystem::path& folder, const ShardFileInfo& file, bool checksums);

// Opens a file after check_file and checks its header against the index's entry. Only the
// header is read: pieces are read from the file when copied (copy_piece), so a reader holds the
// piece it asked for, never the whole file.
OpenedFile open_file(const std::filesystem::path& folder, const CheckpointIndex& index,
                     const ShardFileInfo& file);

// Copies the part of `file`'s piece of `unit` that falls in `want` into out (out[0] = want.begin).
// Returns the elements copied.
std::size_t copy_piece(const ShardFileInfo& info, const SafetensorsReader& reader,
                       const std::string& unit, const std::string& state, ElementRange want,
                       float* out);
inline std::size_t copy_piece(const OpenedFile& file, const std::string& unit,
                              const std::string& state, ElementRange want, float* out) {
  return copy_piece(*file.info, *file.reader, unit, state, want, out);
}

}  // namespace zero::checkpoint
