// Saving: a staging folder, each rank's shard file, rank 0's index, the commit (rename, `latest`).
#include "zero/checkpoint/checkpoint_save.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "index_text.h"
#include "shard_file.h"
#include "write_all.h"
#include "zero/checkpoint/checkpoint_index.h"
#include "zero/checkpoint/durable_write.h"
#include "zero/checkpoint/safetensors.h"
#include "zero/config/ds_config.h"
#include "zero/core/error.h"
#include "zero/engine/state_policy.h"

namespace zero::checkpoint {

namespace fs = std::filesystem;

namespace {

// Values as 16-bit pieces in fp32 (exact), all-gathered: every rank's `values` (the same count
// on every rank), in rank order.
std::vector<std::uint64_t> all_gather_u64(Communicator& communicator,
                                          const std::vector<std::uint64_t>& values) {
  std::vector<float> local(values.size() * 4);
  for (std::size_t i = 0; i < values.size(); ++i)
    for (int k = 0; k < 4; ++k)
      local[4 * i + k] = static_cast<float>((values[i] >> (16 * k)) & 0xffffu);
  std::vector<float> all(local.size() * static_cast<std::size_t>(communicator.world_size()));
  communicator.all_gather(local.data(), all.data(), local.size(), DType::kFloat32,
                          "checkpoint file sizes");
  communicator.synchronize();
  std::vector<std::uint64_t> out(all.size() / 4);
  for (std::size_t i = 0; i < out.size(); ++i)
    for (int k = 0; k < 4; ++k) out[i] |= static_cast<std::uint64_t>(all[4 * i + k]) << (16 * k);
  return out;
}

// The range of a unit this rank writes: its shard when the optimizer state is partitioned, else
// (every rank holds everything) its even share, so each element is written once.
ElementRange written_range(const ShardState& shard, std::size_t num_elements, bool partitioned,
                           int world, int rank) {
  if (partitioned) return shard.range;
  const ElementRange share = shard_range(padded_num_elements(num_elements, world, 1), world, rank);
  return intersect(share, intersect(shard.range, {0, num_elements}));
}

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
  communicator_.barrier("checkpoint staging folder");
}

void CheckpointSave::write_engine(Engine& engine) {
  const int rank = communicator_.rank(), world = communicator_.world_size();
  ZERO_CHECK(engine.world_size() == world, "checkpoint: the engine's world (", engine.world_size(),
             ") is not the communicator's (", world, ")");
  const bool partitioned = state_policy(engine.options()).partitioned;
  std::vector<ShardState> shards = engine.shard_states();

  SafetensorsWriter writer;
  writer.set_metadata("format", "zero-shard");
  writer.set_metadata("version", std::to_string(kFormatVersion));
  writer.set_metadata("rank", std::to_string(rank));
  writer.set_metadata("world_size", std::to_string(world));
  std::vector<std::uint64_t> ranges;  // (begin, end) per unit in engine order
  for (const ShardState& shard : shards) {
    const std::size_t count = engine.layout(engine.unit(shard.unit)).num_elements();
    const ElementRange range = written_range(shard, count, partitioned, world, rank);
    ranges.push_back(range.begin);
    ranges.push_back(range.end);
    if (range.empty()) continue;
    writer.set_metadata(range_key(shard.unit),
                        std::to_string(range.begin) + ":" + std::to_string(range.end));
    const std::size_t skip = range.begin - shard.range.begin;
    const std::vector<std::int64_t> shape{static_cast<std::int64_t>(range.size())};
    writer.add(tensor_name(shard.unit, "params"), SafetensorsDType::kF32, shape,
               shard.params.data() + skip, range.size() * sizeof(float));
    for (const auto& [name, values] : shard.optimizer_state)
      writer.add(tensor_name(shard.unit, name), SafetensorsDType::kF32, shape, values.data() + skip,
                 range.size() * sizeof(float));
  }

  const std::string name = shard_file_name(rank, world);
  const fs::path path = staging_ / name;
  const std::string header = writer.header_bytes();
  const std::vector<std::byte>& data = writer.data_bytes();
  std::uint64_t checksum = checksum_bytes(header.data(), header.size(), kChecksumSeed);
  checksum = checksum_bytes(data.data(), data.size(), checksum);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ZERO_CHECK(fd >= 0, "cannot create ", path.string(), ": ", std::strerror(errno));
  try {
    write_all(fd, header.data(), header.size(), path);
    const std::size_t half = data.size() / 2;
    write_all(fd, data.data(), half, path);
    if (const char* slow = std::getenv("ZERO_TEST_SLOW_SAVE_MS"); slow && *slow)
      std::this_thread::sleep_for(std::chrono::milliseconds(std::atoll(slow)));
    write_all(fd, data.data() + half, data.size() - half, path);
    ZERO_CHECK(::fsync(fd) == 0, "fsync of ", path.string(), " failed: ", std::strerror(errno));
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);

  std::vector<std::uint64_t> mine{header.size() + data.size(), checksum};
  mine.insert(mine.end(), ranges.begin(), ranges.end());
  const std::vector<std::uint64_t> all = all_gather_u64(communicator_, mine);
  if (rank != 0) return;
  CheckpointIndex index;
  index.world_size = world;
  index.stage = engine.options().stage;
  index.param_dtype = std::string(name_of(engine.param_dtype()));
  index.optimizer = std::string(config::name_of(engine.options().optimizer.type));
  if (!shards.empty())
    for (const auto& [state, values] : shards.front().optimizer_state)
      index.optimizer_states.push_back(state);
  index.training = engine.training_state();
  for (const ShardState& shard : shards)
    index.units.push_back({shard.unit, engine.layout(engine.unit(shard.unit)).num_elements()});
  for (int r = 0; r < world; ++r) {
    const std::uint64_t* values = all.data() + static_cast<std::size_t>(r) * mine.size();
    ShardFileInfo file;
    file.name = shard_file_name(r, world);
    file.rank = r;
    file.size_bytes = values[0];
    file.checksum = values[1];
    for (std::size_t u = 0; u < shards.size(); ++u) {
      const ElementRange range{values[2 + 2 * u], values[3 + 2 * u]};
      if (!range.empty()) file.ranges[shards[u].unit] = range;
    }
    index.files.push_back(std::move(file));
  }
  write_file_atomically(staging_ / kIndexFileName, index_text(index));
}

fs::path CheckpointSave::commit() {
  communicator_.barrier("checkpoint files written");
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
  communicator_.barrier("checkpoint committed");
  return final_path;
}

}  // namespace zero::checkpoint
