// Fuzzes zero_checkpoint.json and shard validation: the input is the index's text, then after a
// NUL byte the bytes of the one shard file "zero_shard-00000-of-00001.safetensors" (absent when
// there is no NUL). The folder is read as a resume reads it: read_index, check_complete, then
// validate without and with checksums.
#include "fuzz_input.h"
#include "zero/checkpoint/checkpoint_index.h"
#include "zero/checkpoint/checkpoint_validation.h"
#include "zero/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto [index_text, shard_bytes] = zero::fuzz::split_at_nul(zero::fuzz::as_text(data, size));
  const std::filesystem::path folder = zero::fuzz::fresh_folder();
  zero::fuzz::write_bytes(folder / zero::checkpoint::kIndexFileName, index_text);
  if (!shard_bytes.empty())
    zero::fuzz::write_bytes(folder / zero::checkpoint::shard_file_name(0, 1), shard_bytes);
  try {
    const zero::checkpoint::CheckpointIndex index = zero::checkpoint::read_index(folder);
    try {
      zero::checkpoint::check_complete(folder, index);
    } catch (const zero::Error&) {
    }
    for (const bool checksums : {false, true}) {
      try {
        zero::checkpoint::validate(folder, index, checksums);
      } catch (const zero::Error&) {
      }
    }
  } catch (const zero::Error&) {
  }
  return 0;
}
