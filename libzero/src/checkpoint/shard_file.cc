// Reading one shard file: its size, checksum and header checked against the index, pieces copied.
#include "shard_file.h"

#include <cstring>
#include <sstream>
#include <system_error>
#include <vector>

#include "index_text.h"
#include "zero/core/error.h"

namespace zero::checkpoint {

namespace fs = std::filesystem;

void check_file(const fs::path& folder, const ShardFileInfo& file, bool checksums) {
  const fs::path path = folder / file.name;
  std::error_code error;
  ZERO_CHECK(fs::is_regular_file(path, error), "checkpoint ", folder.string(), ": shard file ",
             path.string(), " (rank ", file.rank, ") is missing");
  const std::uintmax_t size = fs::file_size(path, error);
  ZERO_CHECK(!error && size == file.size_bytes, "checkpoint ", folder.string(), ": shard file ",
             path.string(), " has ", size, " bytes, the index records ", file.size_bytes,
             size < file.size_bytes ? " (truncated)" : "");
  if (checksums) {
    const std::uint64_t sum = file_checksum(path);
    ZERO_CHECK(sum == file.checksum, "checkpoint ", folder.string(), ": shard file ", path.string(),
               " has checksum ", checksum_hex(sum), ", the index records ",
               checksum_hex(file.checksum), " (the file is corrupt)");
  }
}

OpenedFile open_file(const fs::path& folder, const CheckpointIndex& index,
                     const ShardFileInfo& file) {
  OpenedFile opened{&file, std::make_unique<SafetensorsReader>(folder / file.name, false)};
  const SafetensorsReader& reader = *opened.reader;
  const std::string where = (folder / file.name).string();
  for (const auto& [unit, range] : file.ranges) {
    const auto found = reader.metadata().find(range_key(unit));
    ZERO_CHECK(found != reader.metadata().end(), "shard file ", where, " has no range for unit '",
               unit, "' listed in ", kIndexFileName);
    std::ostringstream expected;
    expected << range.begin << ":" << range.end;
    ZERO_CHECK(found->second == expected.str(), "shard file ", where, ": unit '", unit, "' covers ",
               found->second, ", ", kIndexFileName, " says ", expected.str());
    std::vector<std::string> states{"params"};
    states.insert(states.end(), index.optimizer_states.begin(), index.optimizer_states.end());
    for (const std::string& state : states) {
      const SafetensorsTensor& tensor = reader.tensor(tensor_name(unit, state));
      ZERO_CHECK(tensor.dtype == SafetensorsDType::kF32 && tensor.num_elements() == range.size(),
                 "shard file ", where, ": tensor '", tensor.name, "' holds ", tensor.num_elements(),
                 " ", name_of(tensor.dtype), " values, its range ", range.size(), " F32");
    }
  }
  return opened;
}

std::size_t copy_piece(const ShardFileInfo& info, const SafetensorsReader& reader,
                       const std::string& unit, const std::string& state, ElementRange want,
                       float* out) {
  const auto found = info.ranges.find(unit);
  if (found == info.ranges.end()) return 0;
  const ElementRange have = found->second;
  const ElementRange both = intersect(have, want);
  if (both.empty()) return 0;
  const SafetensorsTensor& tensor = reader.tensor(tensor_name(unit, state));
  reader.read_bytes(tensor, (both.begin - have.begin) * sizeof(float), both.size() * sizeof(float),
                    out + (both.begin - want.begin));
  return both.size();
}

}  // namespace zero::checkpoint
