// Resharding load: the pieces of the shard files that intersect a rank's shards (load) or whole
// units (read_unit, read_units), checked against the index.
#include "zero/checkpoint/resharding_load.h"

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>

#include "shard_file.h"
#include "zero/checkpoint/checkpoint_validation.h"
#include "zero/core/error.h"

namespace zero::checkpoint {

namespace fs = std::filesystem;

namespace {

std::string join(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& word : words) out += (out.empty() ? "" : ", ") + word;
  return out.empty() ? "none" : out;
}

// The model: the same units as the checkpoint's, in any order, with the same sizes. Throws
// naming the first unit that differs.
void check_same_units(const Engine& engine, const CheckpointIndex& index,
                      const std::string& where) {
  std::vector<std::string> engine_units;
  for (UnitId u = 0; u < static_cast<UnitId>(engine.num_units()); ++u) {
    const std::string& name = engine.unit_name(u);
    engine_units.push_back(name);
    const UnitInfo* unit = index.find_unit(name);
    ZERO_CHECK(
        unit != nullptr, "checkpoint ", where, " has no unit '", name,
        "' (it was written for another model: its units are ",
        [&] {
          std::vector<std::string> names;
          for (const UnitInfo& info : index.units) names.push_back(info.name);
          return join(names);
        }(),
        ")");
    ZERO_CHECK(unit->num_elements == engine.layout(u).num_elements(), "checkpoint ", where,
               ": unit '", name, "' has ", unit->num_elements, " elements, this model's has ",
               engine.layout(u).num_elements(), " (another model config)");
  }
  for (const UnitInfo& unit : index.units)
    ZERO_CHECK(std::find(engine_units.begin(), engine_units.end(), unit.name) != engine_units.end(),
               "checkpoint ", where, " has unit '", unit.name, "', which this model does not");
}

// Reads this rank's shards from the shard files straight into where the engine keeps them
// (Engine::fill_shard_states: the resident states, or one NVMe sub-group's host slot at a time),
// each piece with one pread (device-resident states: into a pinned piece, then copied). A file is
// checked (size, checksum, header) and opened when a shard first needs it; only its header stays in
// memory. Memory besides the states: the headers, whatever the world that wrote them. Throws naming
// the file, or the shard whose elements are not covered exactly once.
void copy_into_shards(Engine& engine, const fs::path& folder, const CheckpointIndex& index,
                      const std::string& where) {
  std::vector<OpenedFile> opened(index.files.size());
  engine.fill_shard_states(
      [&](ShardState& shard) {
        std::vector<std::size_t> copied(1 + shard.optimizer_state.size(), 0);
        // Each state's span (device memory: one pinned piece at a time, Engine::write_shard_values)
        // from every file holding part of it.
        auto read_state = [&](std::size_t k, const std::string& state, std::span<float> values) {
          engine.write_shard_values(
              values, shard.space, false, [&](std::size_t offset, std::span<float> piece) {
                const ElementRange want{shard.range.begin + offset,
                                        shard.range.begin + offset + piece.size()};
                for (std::size_t f = 0; f < index.files.size(); ++f) {
                  const ShardFileInfo& file = index.files[f];
                  const auto found = file.ranges.find(shard.unit);
                  if (found == file.ranges.end() || intersect(found->second, want).empty())
                    continue;
                  if (!opened[f].reader) {
                    check_file(folder, file, true);
                    opened[f] = open_file(folder, index, file);
                  }
                  copied[k] += copy_piece(opened[f], shard.unit, state, want, piece.data());
                }
              });
        };
        read_state(0, "params", shard.params);
        for (std::size_t k = 0; k < shard.optimizer_state.size(); ++k)
          read_state(k + 1, shard.optimizer_state[k].first, shard.optimizer_state[k].second);
        for (std::size_t k = 0; k < copied.size(); ++k)
          ZERO_CHECK(copied[k] == shard.range.size(), "checkpoint ", where, ": unit '", shard.unit,
                     "' elements [", shard.range.begin, ", ", shard.range.end, ") of '",
                     k == 0 ? std::string("params") : shard.optimizer_state[k - 1].first,
                     "' are covered ", copied[k], " times over, not once");
      },
      Engine::ShardFill::kEveryElement);
}

}  // namespace

CheckpointIndex load(Engine& engine, const fs::path& folder) {
  const CheckpointIndex index = read_index(folder);
  const std::string where = folder.string();
  check_same_units(engine, index, where);
  engine.initialize();  // on every rank before the checks: the agreement below is collective
  const std::vector<std::string> states = engine.optimizer_state_names();
  ZERO_CHECK(states == index.optimizer_states, "checkpoint ", where, " holds optimizer states (",
             join(index.optimizer_states), ") of ", index.optimizer,
             "; this engine's optimizer keeps (", join(states), ")");
  ZERO_CHECK(static_cast<int>(index.files.size()) == index.world_size, where, "/", kIndexFileName,
             " lists ", index.files.size(), " shard files for a world of ", index.world_size);

  // The ranks agree on the outcome before anything collective follows: a rank that found a bad
  // file throws its message, the others say that one did (no rank is left waiting in a
  // collective).
  std::string failure;
  try {
    check_complete(folder, index);  // every file present with its size, on every rank
    copy_into_shards(engine, folder, index, where);
  } catch (const Error& error) {
    failure = error.what();
  }
  const double failed = engine.average_across_ranks(failure.empty() ? 0.0 : 1.0);
  if (!failure.empty()) throw Error(failure);
  ZERO_CHECK(failed == 0.0, "checkpoint ", where,
             ": another rank could not read its shard files (its error names the file)");
  engine.set_training_state(index.training);
  engine.refresh_params();
  return index;
}

UnitReader::UnitReader(fs::path folder, CheckpointIndex index)
    : folder_(std::move(folder)), index_(std::move(index)), readers_(index_.files.size()) {}
UnitReader::~UnitReader() = default;
UnitReader::UnitReader(UnitReader&&) noexcept = default;
UnitReader& UnitReader::operator=(UnitReader&&) noexcept = default;

std::size_t UnitReader::num_elements(const std::string& unit) const {
  const UnitInfo* info = index_.find_unit(unit);
  ZERO_CHECK(info != nullptr, "checkpoint ", folder_.string(), " has no unit '", unit, "'");
  return info->num_elements;
}

void UnitReader::read(const std::string& unit, const std::string& state, std::span<float> out) {
  const std::size_t count = num_elements(unit);
  ZERO_CHECK(out.size() == count, "checkpoint ", folder_.string(), ": unit '", unit, "' has ",
             count, " elements, asked into ", out.size());
  std::size_t copied = 0;
  for (std::size_t f = 0; f < index_.files.size(); ++f) {
    const ShardFileInfo& file = index_.files[f];
    const auto found = file.ranges.find(unit);
    if (found == file.ranges.end() || found->second.empty()) continue;
    if (!readers_[f]) {
      check_file(folder_, file, true);
      readers_[f] = open_file(folder_, index_, file).reader;
    }
    copied += copy_piece(file, *readers_[f], unit, state, {0, count}, out.data());
  }
  ZERO_CHECK(copied == count, "checkpoint ", folder_.string(), ": unit '", unit, "' has ", count,
             " elements, the shard files hold ", copied);
}

std::vector<float> UnitReader::read(const std::string& unit, const std::string& state) {
  std::vector<float> values(num_elements(unit));
  read(unit, state, values);
  return values;
}

std::vector<float> read_unit(const fs::path& folder, const CheckpointIndex& index,
                             const std::string& unit, const std::string& state) {
  return UnitReader(folder, index).read(unit, state);
}

std::map<std::string, std::vector<float>> read_units(const fs::path& folder,
                                                     const CheckpointIndex& index,
                                                     const std::string& state) {
  for (const ShardFileInfo& file : index.files)
    for (const auto& [name, range] : file.ranges)
      ZERO_CHECK(index.find_unit(name) != nullptr, "checkpoint ", folder.string(), ": file ",
                 file.name, " holds unit '", name, "', which the index does not list");
  UnitReader reader(folder, index);
  std::map<std::string, std::vector<float>> units;
  for (const UnitInfo& unit : index.units) units[unit.name] = reader.read(unit.name, state);
  return units;
}

}  // namespace zero::checkpoint
