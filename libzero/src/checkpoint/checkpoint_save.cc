// Saving: a staging folder, each rank's shard file, rank 0's index, the commit (rename, `latest`).
#include "zero/checkpoint/checkpoint_save.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "index_text.h"
#include "shard_file.h"
#include "zero/checkpoint/checkpoint_index.h"
#include "zero/checkpoint/durable_write.h"
#include "zero/checkpoint/safetensors.h"
#include "zero/comm/host_collectives.h"
#include "zero/config/ds_config.h"
#include "zero/core/error.h"
#include "zero/engine/state_policy.h"

namespace zero::checkpoint {

namespace fs = std::filesystem;

namespace {

// Values as 16-bit pieces in fp32 (exact), all-gathered: every rank's `values` (the same count
// on every rank), in rank order, staged through the context's device memory (all_gather_host).
std::vector<std::uint64_t> all_gather_u64(Communicator& communicator, DeviceContext& context,
                                          const std::vector<std::uint64_t>& values) {
  std::vector<float> local(values.size() * 4);
  for (std::size_t i = 0; i < values.size(); ++i)
    for (int k = 0; k < 4; ++k)
      local[4 * i + k] = static_cast<float>((values[i] >> (16 * k)) & 0xffffu);
  std::vector<float> all(local.size() * static_cast<std::size_t>(communicator.world_size()));
  all_gather_host(communicator, context, local, all, "checkpoint file sizes");
  std::vector<std::uint64_t> out(all.size() / 4);
  for (std::size_t i = 0; i < out.size(); ++i)
    for (int k = 0; k < 4; ++k) out[i] |= static_cast<std::uint64_t>(all[4 * i + k]) << (16 * k);
  return out;
}

// checksum_bytes over bytes given in pieces of any size: whole 8-byte words as in one call
// (a carry of up to 7 bytes between pieces), the last bytes one by one at value().
class StreamChecksum {
 public:
  void add(const void* data, std::size_t size_bytes) {
    const auto* bytes = static_cast<const unsigned char*>(data);
    if (carried_ > 0) {
      const std::size_t take = std::min(8 - carried_, size_bytes);
      std::memcpy(carry_ + carried_, bytes, take);
      carried_ += take;
      bytes += take;
      size_bytes -= take;
      if (carried_ < 8) return;
      hash_ = checksum_bytes(carry_, 8, hash_);
      carried_ = 0;
    }
    const std::size_t words = size_bytes / 8 * 8;
    hash_ = checksum_bytes(bytes, words, hash_);
    carried_ = size_bytes - words;
    std::memcpy(carry_, bytes + words, carried_);
  }
  std::uint64_t value() const { return checksum_bytes(carry_, carried_, hash_); }

 private:
  std::uint64_t hash_ = kChecksumSeed;
  unsigned char carry_[8] = {};
  std::size_t carried_ = 0;
};

// The range of a unit this rank writes: its shard when the optimizer state is partitioned, else
// (every rank holds everything) its even share, so each element is written once. `held` is the
// part of the unit the rank holds (ShardState::range).
ElementRange written_range(ElementRange held, std::size_t num_elements, bool partitioned, int world,
                           int rank) {
  if (partitioned) return held;
  const ElementRange share = shard_range(padded_num_elements(num_elements, world, 1), world, rank);
  return intersect(share, intersect(held, {0, num_elements}));
}

// One shard file streamed through SafetensorsStreamWriter: the header from the entries, then each
// tensor's bytes in entry order, checksummed on the way. ZERO_TEST_SLOW_SAVE_MS (a test hook)
// sleeps that long with half the data written.
class ShardFileStream {
 public:
  ShardFileStream(const fs::path& path, const std::vector<SafetensorsEntry>& entries,
                  const std::map<std::string, std::string>& metadata)
      : file_(path, entries, metadata) {
    const std::string header = safetensors_header(file_.tensors(), metadata);
    checksum_.add(header.data(), header.size());
    half_ = (file_.file_size_bytes() - header.size()) / 2;
    pause_at_half();
  }
  void write(const std::string& name, std::span<const float> values) {
    const std::size_t bytes = values.size() * sizeof(float);
    file_.write(name, values.data(), bytes);
    checksum_.add(values.data(), bytes);
    written_ += bytes;
    pause_at_half();
  }
  // Size and checksum of the finished file.
  std::pair<std::uint64_t, std::uint64_t> finish() {
    file_.finish();
    return {file_.file_size_bytes(), checksum_.value()};
  }

 private:
  void pause_at_half() {
    if (slept_ || written_ < half_) return;
    slept_ = true;
    if (const char* slow = std::getenv("ZERO_TEST_SLOW_SAVE_MS"); slow && *slow)
      std::this_thread::sleep_for(std::chrono::milliseconds(std::atoll(slow)));
  }
  SafetensorsStreamWriter file_;
  StreamChecksum checksum_;
  std::size_t half_ = 0;
  std::size_t written_ = 0;
  bool slept_ = false;
};

}  // namespace

CheckpointSave::CheckpointSave(Communicator& communicator, fs::path root, std::string tag)
    : communicator_(communicator), root_(std::move(root)), tag_(std::move(tag)) {
  ZERO_CHECK(!tag_.empty() && tag_.find('/') == std::string::npos && tag_ != kLatestFileName &&
                 !tag_.starts_with(kStagingPrefix),
             "checkpoint tag '", tag_, "' is not a plain folder name");
  staging_ = root_ / (kStagingPrefix + tag_);
  if (communicator_.rank() == 0) {
    fs::create_directories(root_);
    fs::remove_all(staging_);
    fs::create_directories(staging_);
  }
  host_barrier(communicator_, "checkpoint staging folder");
}

CheckpointSave::~CheckpointSave() {
  if (committed_ || communicator_.rank() != 0) return;
  std::error_code ignored;
  fs::remove_all(staging_, ignored);
}

void CheckpointSave::write_engine(Engine& engine) {
  const int rank = communicator_.rank(), world = communicator_.world_size();
  ZERO_CHECK(engine.world_size() == world, "checkpoint: the engine's world (", engine.world_size(),
             ") is not the communicator's (", world, ")");
  const bool partitioned = state_policy(engine.options()).partitioned;
  const std::vector<std::string> states = engine.optimizer_state_names();

  // The header first, from the layouts (what the rank holds of each unit), then the values
  // streamed from where the states live (Engine::visit_shard_states: the resident spans, device
  // memory in pinned pieces, or one sub-group at a time from NVMe), never a copy of the rank's
  // whole shard.
  std::vector<SafetensorsEntry> entries;
  std::map<std::string, std::string> metadata{{"format", "zero-shard"},
                                              {"version", std::to_string(kFormatVersion)},
                                              {"rank", std::to_string(rank)},
                                              {"world_size", std::to_string(world)}};
  std::vector<std::uint64_t> ranges;  // (begin, end) per unit in engine order
  for (UnitId u = 0; u < static_cast<UnitId>(engine.num_units()); ++u) {
    const FlatLayout& layout = engine.layout(u);
    const ElementRange owned =
        partitioned ? layout.shard(rank) : ElementRange{0, layout.padded_num_elements()};
    const ElementRange held = intersect(owned, {0, layout.num_elements()});
    const ElementRange range = written_range(held, layout.num_elements(), partitioned, world, rank);
    ranges.push_back(range.begin);
    ranges.push_back(range.end);
    if (range.empty()) continue;
    const std::string& unit = engine.unit_name(u);
    metadata[range_key(unit)] = std::to_string(range.begin) + ":" + std::to_string(range.end);
    const std::vector<std::int64_t> shape{static_cast<std::int64_t>(range.size())};
    entries.push_back({tensor_name(unit, "params"), SafetensorsDType::kF32, shape});
    for (const std::string& name : states)
      entries.push_back({tensor_name(unit, name), SafetensorsDType::kF32, shape});
  }

  ShardFileStream stream(staging_ / shard_file_name(rank, world), entries, metadata);
  std::size_t next = 0;  // the unit the visitor should hand next
  engine.visit_shard_states([&](const ShardState& shard) {
    const UnitId u = engine.unit(shard.unit);
    ZERO_CHECK(u == static_cast<UnitId>(next), "checkpoint: the engine handed unit '", shard.unit,
               "' out of order");
    ++next;
    const auto at = 2 * static_cast<std::size_t>(u);
    const ElementRange range{ranges[at], ranges[at + 1]};
    if (range.empty()) return;
    ZERO_CHECK(range.begin >= shard.range.begin && range.end <= shard.range.end,
               "checkpoint: unit '", shard.unit, "' holds ", shard.range.begin, ":",
               shard.range.end, ", not the range ", range.begin, ":", range.end, " to write");
    const std::size_t skip = range.begin - shard.range.begin;
    // Device-resident states (ShardState::space) reach the file through bounded pinned pieces.
    auto write = [&](const std::string& tensor, std::span<const float> values) {
      engine.read_shard_values(
          values.subspan(skip, range.size()), shard.space,
          [&](std::size_t, std::span<const float> piece) { stream.write(tensor, piece); });
    };
    write(tensor_name(shard.unit, "params"), shard.params);
    for (const auto& [name, values] : shard.optimizer_state)
      write(tensor_name(shard.unit, name), values);
  });
  ZERO_CHECK(next == engine.num_units(), "checkpoint: the engine handed ", next, " of ",
             engine.num_units(), " units");
  const auto [size_bytes, checksum] = stream.finish();

  std::vector<std::uint64_t> mine{size_bytes, checksum};
  mine.insert(mine.end(), ranges.begin(), ranges.end());
  const std::vector<std::uint64_t> all = all_gather_u64(communicator_, engine.context(), mine);
  if (rank != 0) return;
  CheckpointIndex index;
  index.world_size = world;
  index.stage = engine.options().stage;
  index.param_dtype = std::string(name_of(engine.param_dtype()));
  index.optimizer = std::string(config::name_of(engine.options().optimizer.type));
  if (engine.num_units() > 0) index.optimizer_states = states;
  index.training = engine.training_state();
  for (UnitId u = 0; u < static_cast<UnitId>(engine.num_units()); ++u)
    index.units.push_back({engine.unit_name(u), engine.layout(u).num_elements()});
  for (int r = 0; r < world; ++r) {
    const std::uint64_t* values = all.data() + static_cast<std::size_t>(r) * mine.size();
    ShardFileInfo file;
    file.name = shard_file_name(r, world);
    file.rank = r;
    file.size_bytes = values[0];
    file.checksum = values[1];
    for (UnitId u = 0; u < static_cast<UnitId>(engine.num_units()); ++u) {
      const auto at = 2 + 2 * static_cast<std::size_t>(u);
      const ElementRange range{values[at], values[at + 1]};
      if (!range.empty()) file.ranges[engine.unit_name(u)] = range;
    }
    index.files.push_back(std::move(file));
  }
  write_file_atomically(staging_ / kIndexFileName, index_text(index));
}

fs::path CheckpointSave::commit() {
  host_barrier(communicator_, "checkpoint files written");
  const fs::path final_path = root_ / tag_;
  if (communicator_.rank() == 0) {
    for (const fs::directory_entry& entry : fs::recursive_directory_iterator(staging_))
      fsync_path(entry.path());  // files rank 0 wrote, and sub-folders
    fsync_path(staging_);
    if (fs::exists(final_path)) {  // saved again under the same tag: swap, then drop the old one
      const fs::path old = root_ / (std::string(kStagingPrefix) + "old-" + tag_);
      fs::remove_all(old);
      fs::rename(final_path, old);
      fs::rename(staging_, final_path);
      fs::remove_all(old);
    } else {
      fs::rename(staging_, final_path);
    }
    fsync_path(root_);
    write_file_atomically(root_ / kLatestFileName, tag_ + "\n");
  }
  committed_ = true;  // renamed: from here on a failure leaves the staging folder's name unused
  host_barrier(communicator_, "checkpoint committed");
  return final_path;
}

}  // namespace zero::checkpoint
