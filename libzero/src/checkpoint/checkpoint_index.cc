// zero_checkpoint.json: written from and read into CheckpointIndex; shard file names; checksums.
#include "zero/checkpoint/checkpoint_index.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "index_text.h"
#include "zero/core/error.h"

namespace zero::checkpoint {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr std::uint64_t kFnvPrime = 0x100000001b3ull;

std::uint64_t parse_hex(const std::string& text, const fs::path& file) {
  ZERO_CHECK(text.size() == 16 && text.find_first_not_of("0123456789abcdef") == std::string::npos,
             file.string(), ": checksum '", text, "' is not 16 hexadecimal digits");
  return std::strtoull(text.c_str(), nullptr, 16);
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

}  // namespace

std::string checksum_hex(std::uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(value));
  return text;
}

std::string index_text(const CheckpointIndex& index) {
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
                     {"checksum", checksum_hex(file.checksum)},
                     {"ranges", ranges}});
  }
  const ordered root = {{"format", "zero-checkpoint"},
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
  return root.dump(1) + "\n";
}

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
  std::uint64_t hash = kChecksumSeed;
  while (stream) {
    stream.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    hash = checksum_bytes(buffer.data(), static_cast<std::size_t>(stream.gcount()), hash);
  }
  return hash;
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

}  // namespace zero::checkpoint
