// zero's resumable checkpoints: shard files with global ranges, the index, the crash-safe commit.
#include "zero/checkpoint/zero_checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "zero/checkpoint/safetensors.h"
#include "zero/config/ds_config.h"
#include "zero/core/error.h"
#include "zero/engine/memory_formula.h"

namespace zero::checkpoint {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr std::uint64_t kFnvOffset = 0xcbf29ce484222325ull;
constexpr std::uint64_t kFnvPrime = 0x100000001b3ull;

std::string hex(std::uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(value));
  return text;
}

std::uint64_t parse_hex(const std::string& text, const fs::path& file) {
  ZERO_CHECK(text.size() == 16 && text.find_first_not_of("0123456789abcdef") == std::string::npos,
             file.string(), ": checksum '", text, "' is not 16 hexadecimal digits");
  return std::strtoull(text.c_str(), nullptr, 16);
}

std::string tensor_name(const std::string& unit, const std::string& state) {
  return unit + "/" + state;
}

std::string range_key(const std::string& unit) { return "range." + unit; }

void write_all(int fd, const void* data, std::size_t size, const fs::path& path) {
  const char* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t written = ::write(fd, bytes, size);
    if (written < 0 && errno == EINTR) continue;
    ZERO_CHECK(written > 0, "writing ", path.string(), " failed: ", std::strerror(errno));
    bytes += written;
    size -= static_cast<std::size_t>(written);
  }
}

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

nlohmann::ordered_json training_to_json(const TrainingState& state) {
  return {{"global_steps", state.global_steps},
          {"skipped_steps", state.skipped_steps},
          {"optimizer_steps", state.optimizer_steps},
          {"scheduler_last_batch_iteration", state.scheduler_last_batch_iteration},
          {"loss_scaler",
           {{"scale", state.loss_scaler.scale},
            {"iteration", state.loss_scaler.iteration},
            {"last_overflow_iteration", state.loss_scaler.last_overflow_iteration},
            {"hysteresis", state.loss_scaler.hysteresis}}}};
}

nlohmann::ordered_json index_to_json(const CheckpointIndex& index) {
  using ordered = nlohmann::ordered_json;
  ordered units = ordered::array();
  for (const UnitInfo& unit : index.units)
    units.push_back({{"name", unit.name}, {"num_elements", unit.num_elements}});
  ordered files = ordered::array();
  for (const ShardFileInfo& file : index.files) {
    ordered ranges = ordered::object();
    for (const auto& [unit, range] : file.ranges) ranges[unit] = {range.begin, range.end};
    files.push_back({{"name", file.name},
                     {"rank", file.rank},
                     {"size_bytes", file.size_bytes},
                     {"checksum", hex(file.checksum)},
                     {"ranges", ranges}});
  }
  return {{"format", "zero-checkpoint"},
          {"version", index.version},
          {"world_size", index.world_size},
          {"stage", index.stage},
          {"param_dtype", index.param_dtype},
          {"master_dtype", index.master_dtype},
          {"optimizer", index.optimizer},
          {"optimizer_states", index.optimizer_states},
          {"training_state", training_to_json(index.training)},
          {"units", units},
          {"files", files}};
}

// One opened, validated shard file.
struct OpenedFile {
  const ShardFileInfo* info = nullptr;
  std::unique_ptr<SafetensorsReader> reader;
};

// Size and checksum against the index; throws naming the file.
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
               " has checksum ", hex(sum), ", the index records ", hex(file.checksum),
               " (the file is corrupt)");
  }
}

// Opens a file after check_file and checks its header against the index's entry.
OpenedFile open_file(const fs::path& folder, const CheckpointIndex& index,
                     const ShardFileInfo& file) {
  OpenedFile opened{&file, std::make_unique<SafetensorsReader>(folder / file.name)};
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

// Copies the part of `file`'s piece of `unit` that falls in `want` into out (out[0] = want.begin).
std::size_t copy_piece(const OpenedFile& file, const std::string& unit, const std::string& state,
                       ElementRange want, float* out) {
  const auto found = file.info->ranges.find(unit);
  if (found == file.info->ranges.end()) return 0;
  const ElementRange have = found->second;
  const ElementRange both = intersect(have, want);
  if (both.empty()) return 0;
  const SafetensorsTensor& tensor = file.reader->tensor(tensor_name(unit, state));
  const float* values = reinterpret_cast<const float*>(file.reader->data(tensor));
  std::memcpy(out + (both.begin - want.begin), values + (both.begin - have.begin),
              both.size() * sizeof(float));
  return both.size();
}

std::string join(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& word : words) out += (out.empty() ? "" : ", ") + word;
  return out.empty() ? "none" : out;
}

}  // namespace

std::string shard_file_name(int rank, int world_size) {
  char name[64];
  std::snprintf(name, sizeof(name), "zero_shard-%05d-of-%05d.safetensors", rank, world_size);
  return name;
}

const UnitInfo* CheckpointIndex::find_unit(const std::string& name) const {
  for (const UnitInfo& unit : units)
    if (unit.name == name) return &unit;
  return nullptr;
}

std::uint64_t checksum_bytes(const void* data, std::size_t size_bytes, std::uint64_t seed) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  std::uint64_t hash = seed;
  std::size_t i = 0;
  for (; i + 8 <= size_bytes; i += 8) {
    std::uint64_t word;
    std::memcpy(&word, bytes + i, 8);
    hash = (hash ^ word) * kFnvPrime;
  }
  for (; i < size_bytes; ++i) hash = (hash ^ bytes[i]) * kFnvPrime;
  return hash;
}

std::uint64_t file_checksum(const fs::path& path) {
  std::ifstream stream(path, std::ios::binary);
  ZERO_CHECK(stream.good(), "cannot read ", path.string());
  std::vector<char> buffer(1 << 20);  // a multiple of 8: words stay aligned across chunks
  std::uint64_t hash = kFnvOffset;
  while (stream) {
    stream.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    hash = checksum_bytes(buffer.data(), static_cast<std::size_t>(stream.gcount()), hash);
  }
  return hash;
}

void fsync_path(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ZERO_CHECK(fd >= 0, "cannot open ", path.string(), " to fsync it: ", std::strerror(errno));
  const int status = ::fsync(fd);
  const int saved = errno;
  ::close(fd);
  ZERO_CHECK(status == 0, "fsync of ", path.string(), " failed: ", std::strerror(saved));
}

void write_file_atomically(const fs::path& path, const std::string& text) {
  const fs::path temporary = path.string() + ".tmp";
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ZERO_CHECK(fd >= 0, "cannot create ", temporary.string(), ": ", std::strerror(errno));
  try {
    write_all(fd, text.data(), text.size(), temporary);
    ZERO_CHECK(::fsync(fd) == 0, "fsync of ", temporary.string(),
               " failed: ", std::strerror(errno));
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  fs::rename(temporary, path);
  fsync_path(path.parent_path().empty() ? fs::path(".") : path.parent_path());
}

CheckpointIndex read_index(const fs::path& folder) {
  const fs::path path = folder / kIndexFileName;
  std::ifstream stream(path);
  ZERO_CHECK(stream.good(), "checkpoint ", folder.string(), " has no ", kIndexFileName,
             " (not a zero checkpoint, or an incomplete one)");
  CheckpointIndex index;
  try {
    const json root = json::parse(stream);
    ZERO_CHECK(root.value("format", "") == "zero-checkpoint", path.string(),
               ": \"format\" is not \"zero-checkpoint\"");
    index.version = root.at("version").get<int>();
    ZERO_CHECK(index.version == kFormatVersion, path.string(), ": format version ", index.version,
               " is not the version this build reads (", kFormatVersion, ")");
    index.world_size = root.at("world_size").get<int>();
    index.stage = root.at("stage").get<int>();
    index.param_dtype = root.at("param_dtype").get<std::string>();
    index.master_dtype = root.at("master_dtype").get<std::string>();
    ZERO_CHECK(index.master_dtype == "fp32", path.string(), ": master_dtype ", index.master_dtype,
               " (this build reads fp32 shard files)");
    index.optimizer = root.at("optimizer").get<std::string>();
    index.optimizer_states = root.at("optimizer_states").get<std::vector<std::string>>();
    const json& training = root.at("training_state");
    index.training.global_steps = training.at("global_steps").get<std::int64_t>();
    index.training.skipped_steps = training.at("skipped_steps").get<std::int64_t>();
    index.training.optimizer_steps = training.at("optimizer_steps").get<std::int64_t>();
    index.training.scheduler_last_batch_iteration =
        training.at("scheduler_last_batch_iteration").get<std::int64_t>();
    const json& scaler = training.at("loss_scaler");
    index.training.loss_scaler.scale = scaler.at("scale").get<double>();
    index.training.loss_scaler.iteration = scaler.at("iteration").get<std::int64_t>();
    index.training.loss_scaler.last_overflow_iteration =
        scaler.at("last_overflow_iteration").get<std::int64_t>();
    index.training.loss_scaler.hysteresis = scaler.at("hysteresis").get<int>();
    for (const json& unit : root.at("units"))
      index.units.push_back(
          {unit.at("name").get<std::string>(), unit.at("num_elements").get<std::size_t>()});
    for (const json& file : root.at("files")) {
      ShardFileInfo info;
      info.name = file.at("name").get<std::string>();
      ZERO_CHECK(info.name.find('/') == std::string::npos && info.name != ".." && info.name != ".",
                 path.string(), ": file name '", info.name, "' is not a plain file name");
      info.rank = file.at("rank").get<int>();
      info.size_bytes = file.at("size_bytes").get<std::uint64_t>();
      info.checksum = parse_hex(file.at("checksum").get<std::string>(), path);
      for (const auto& [unit, range] : file.at("ranges").items())
        info.ranges[unit] = {range.at(0).get<std::size_t>(), range.at(1).get<std::size_t>()};
      index.files.push_back(std::move(info));
    }
  } catch (const json::exception& error) {
    ZERO_THROW("checkpoint index ", path.string(), " is not valid: ", error.what());
  }
  return index;
}

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

fs::path resolve(const fs::path& path) {
  std::error_code error;
  ZERO_CHECK(fs::is_directory(path, error), "checkpoint ", path.string(),
             " does not exist or is not a folder");
  if (fs::exists(path / kIndexFileName)) return path;
  const fs::path latest = path / kLatestFileName;
  if (fs::exists(latest)) {
    std::ifstream stream(latest);
    std::string tag;
    std::getline(stream, tag);
    while (!tag.empty() && std::isspace(static_cast<unsigned char>(tag.back()))) tag.pop_back();
    ZERO_CHECK(!tag.empty() && tag.find('/') == std::string::npos, latest.string(),
               " does not name a checkpoint folder");
    ZERO_CHECK(fs::exists(path / tag / kIndexFileName), latest.string(), " names '", tag,
               "', which is not a complete checkpoint (no ", (path / tag / kIndexFileName).string(),
               ")");
    return path / tag;
  }
  long long best = -1;
  fs::path found;
  for (const fs::directory_entry& entry : fs::directory_iterator(path)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() || !name.starts_with("checkpoint-")) continue;
    char* end = nullptr;
    const long long step = std::strtoll(name.c_str() + 11, &end, 10);
    if (*end != '\0' || !fs::exists(entry.path() / kIndexFileName)) continue;
    if (step > best) best = step, found = entry.path();
  }
  ZERO_CHECK(best >= 0, path.string(), " holds no complete checkpoint (no ", kLatestFileName,
             " file, no checkpoint-N folder with ", kIndexFileName, ")");
  return found;
}

CheckpointIndex load(Engine& engine, const fs::path& folder) {
  const CheckpointIndex index = read_index(folder);
  const std::string where = folder.string();
  // The model: the same units, in any order, with the same sizes.
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
  std::vector<ShardState> shards = engine.shard_states();
  std::vector<std::string> states;
  if (!shards.empty())
    for (const auto& [name, values] : shards.front().optimizer_state) states.push_back(name);
  ZERO_CHECK(states == index.optimizer_states, "checkpoint ", where, " holds optimizer states (",
             join(index.optimizer_states), ") of ", index.optimizer,
             "; this engine's optimizer keeps (", join(states), ")");
  ZERO_CHECK(static_cast<int>(index.files.size()) == index.world_size, where, "/", kIndexFileName,
             " lists ", index.files.size(), " shard files for a world of ", index.world_size);

  // Every file this rank needs, checked and opened once, then the pieces copied. The ranks agree
  // on the outcome before anything collective follows: a rank that found a bad file throws its
  // message, the others say that one did (no rank is left waiting in a collective).
  std::string failure;
  try {
    check_complete(folder, index);  // every file present with its size, on every rank
    // One file at a time (checked, read, copied, released): memory for one file, whatever the
    // world that wrote them. copied[s][k]: elements of shard s, state k (0: params) filled.
    std::vector<std::vector<std::size_t>> copied(shards.size());
    for (std::size_t s = 0; s < shards.size(); ++s)
      copied[s].assign(1 + shards[s].optimizer_state.size(), 0);
    for (const ShardFileInfo& file : index.files) {
      bool needed = false;
      for (const ShardState& shard : shards) {
        const auto found = file.ranges.find(shard.unit);
        needed = needed ||
                 (found != file.ranges.end() && !intersect(found->second, shard.range).empty());
      }
      if (!needed) continue;
      check_file(folder, file, true);
      const OpenedFile opened = open_file(folder, index, file);
      for (std::size_t s = 0; s < shards.size(); ++s) {
        ShardState& shard = shards[s];
        copied[s][0] += copy_piece(opened, shard.unit, "params", shard.range, shard.params.data());
        for (std::size_t k = 0; k < shard.optimizer_state.size(); ++k)
          copied[s][k + 1] += copy_piece(opened, shard.unit, shard.optimizer_state[k].first,
                                         shard.range, shard.optimizer_state[k].second.data());
      }
    }
    for (std::size_t s = 0; s < shards.size(); ++s)
      for (std::size_t k = 0; k < copied[s].size(); ++k)
        ZERO_CHECK(copied[s][k] == shards[s].range.size(), "checkpoint ", where, ": unit '",
                   shards[s].unit, "' elements [", shards[s].range.begin, ", ", shards[s].range.end,
                   ") of '",
                   k == 0 ? std::string("params") : shards[s].optimizer_state[k - 1].first,
                   "' are covered ", copied[s][k], " times over, not once");
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

std::vector<float> read_unit(const fs::path& folder, const CheckpointIndex& index,
                             const std::string& unit, const std::string& state) {
  const UnitInfo* info = index.find_unit(unit);
  ZERO_CHECK(info != nullptr, "checkpoint ", folder.string(), " has no unit '", unit, "'");
  std::vector<float> values(info->num_elements);
  std::size_t copied = 0;
  for (const ShardFileInfo& file : index.files) {
    const auto found = file.ranges.find(unit);
    if (found == file.ranges.end() || found->second.empty()) continue;
    check_file(folder, file, true);
    const OpenedFile opened = open_file(folder, index, file);
    copied += copy_piece(opened, unit, state, {0, info->num_elements}, values.data());
  }
  ZERO_CHECK(copied == info->num_elements, "checkpoint ", folder.string(), ": unit '", unit,
             "' has ", info->num_elements, " elements, the shard files hold ", copied);
  return values;
}

std::map<std::string, std::vector<float>> read_units(const fs::path& folder,
                                                     const CheckpointIndex& index,
                                                     const std::string& state) {
  std::map<std::string, std::vector<float>> units;
  std::map<std::string, std::size_t> copied;
  for (const UnitInfo& unit : index.units) units[unit.name].resize(unit.num_elements);
  for (const ShardFileInfo& file : index.files) {
    if (file.ranges.empty()) continue;
    check_file(folder, file, true);
    const OpenedFile opened = open_file(folder, index, file);
    for (const auto& [name, range] : file.ranges) {
      const auto found = units.find(name);
      ZERO_CHECK(found != units.end(), "checkpoint ", folder.string(), ": file ", file.name,
                 " holds unit '", name, "', which the index does not list");
      copied[name] +=
          copy_piece(opened, name, state, {0, found->second.size()}, found->second.data());
    }
  }
  for (const UnitInfo& unit : index.units)
    ZERO_CHECK(copied[unit.name] == unit.num_elements, "checkpoint ", folder.string(), ": unit '",
               unit.name, "' has ", unit.num_elements, " elements, the shard files hold ",
               copied[unit.name]);
  return units;
}

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
  std::uint64_t checksum = checksum_bytes(header.data(), header.size(), kFnvOffset);
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
  write_file_atomically(staging_ / kIndexFileName, index_to_json(index).dump(1) + "\n");
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

std::vector<fs::path> rotate(const fs::path& root, const std::string& prefix, std::int64_t keep) {
  std::vector<fs::path> removed;
  std::string latest;
  if (std::ifstream stream(root / kLatestFileName); stream) std::getline(stream, latest);
  while (!latest.empty() && std::isspace(static_cast<unsigned char>(latest.back())))
    latest.pop_back();
  std::vector<std::pair<long long, fs::path>> folders;
  for (const fs::directory_entry& entry : fs::directory_iterator(root)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory()) continue;
    if (name.starts_with(kStagingPrefix)) {
      fs::remove_all(entry.path());
      removed.push_back(entry.path());
      continue;
    }
    if (!name.starts_with(prefix)) continue;
    char* end = nullptr;
    const long long number = std::strtoll(name.c_str() + prefix.size(), &end, 10);
    if (end == name.c_str() + prefix.size() || *end != '\0') continue;
    folders.emplace_back(number, entry.path());
  }
  if (keep < 1) return removed;
  std::sort(folders.begin(), folders.end());
  std::size_t excess = folders.size() > static_cast<std::size_t>(keep)
                           ? folders.size() - static_cast<std::size_t>(keep)
                           : 0;
  for (std::size_t i = 0; i < folders.size() && excess > 0; ++i) {
    if (folders[i].second.filename() == latest || i + 1 == folders.size()) continue;
    fs::remove_all(folders[i].second);
    removed.push_back(folders[i].second);
    --excess;
  }
  if (!removed.empty()) fsync_path(root);
  return removed;
}

}  // namespace zero::checkpoint
