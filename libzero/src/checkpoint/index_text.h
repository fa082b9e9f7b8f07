// What the checkpoint sources share about the index's text: the bytes of zero_checkpoint.json and
// how a checksum is spelled in it and in messages. Private to libzero/src/checkpoint.
#pragma once

#include <cstdint>
#include <string>

#include "zero/checkpoint/checkpoint_index.h"

namespace zero::checkpoint {

// The FNV-1a offset basis: checksum_bytes()'s seed for the first bytes of a file.
inline constexpr std::uint64_t kChecksumSeed = 0xcbf29ce484222325ull;

// A checksum as 16 lower-case hexadecimal digits (the index's "checksum" field).
std::string checksum_hex(std::uint64_t value);

// zero_checkpoint.json's contents for `index`, one space of indentation, a final newline.
std::string index_text(const CheckpointIndex& index);

}  // namespace zero::checkpoint
