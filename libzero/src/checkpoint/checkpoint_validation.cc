// Validation of a checkpoint folder: the index's coverage of every unit, every file's size,
// checksum and header.
#include "zero/checkpoint/checkpoint_validation.h"

#include <algorithm>
#include <string>
#include <vector>

#include "shard_file.h"
#include "zero/core/error.h"

namespace zero::checkpoint {

namespace fs = std::filesystem;

void check_complete(const fs::path& folder, const CheckpointIndex& index) {
  const std::string where = (folder / kIndexFileName).string();
  ZERO_CHECK(static_cast<int>(index.files.size()) == index.world_size, where, " lists ",
             index.files.size(), " shard files for a world of ", index.world_size);
  for (std::size_t u = 0; u < index.units.size(); ++u) {
    const UnitInfo& unit = index.units[u];
    for (std::size_t v = 0; v < u; ++v)
      ZERO_CHECK(index.units[v].name != unit.name, where, ": unit '", unit.name, "' twice");
    std::vector<ElementRange> pieces;
    for (const ShardFileInfo& file : index.files) {
      const auto found = file.ranges.find(unit.name);
      if (found != file.ranges.end() && !found->second.empty()) pieces.push_back(found->second);
    }
    std::sort(pieces.begin(), pieces.end(),
              [](ElementRange a, ElementRange b) { return a.begin < b.begin; });
    std::size_t covered = 0;
    for (const ElementRange& piece : pieces) {
      ZERO_CHECK(piece.begin == covered, where, ": unit '", unit.name, "' elements [", covered,
                 ", ", piece.begin, ") are in no shard file or twice");
      covered = piece.end;
    }
    ZERO_CHECK(covered == unit.num_elements, where, ": unit '", unit.name, "' has ",
               unit.num_elements, " elements, the shard files cover ", covered);
  }
  for (const ShardFileInfo& file : index.files) {
    for (const auto& [unit, range] : file.ranges)
      ZERO_CHECK(index.find_unit(unit) != nullptr, where, ": file ", file.name, " holds unit '",
                 unit, "', which the index does not list");
    check_file(folder, file, false);
  }
}

void validate(const fs::path& folder, const CheckpointIndex& index, bool checksums) {
  check_complete(folder, index);
  for (const ShardFileInfo& file : index.files) {
    if (checksums) check_file(folder, file, true);
    open_file(folder, index, file);
  }
}

}  // namespace zero::checkpoint
