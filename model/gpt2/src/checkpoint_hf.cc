// Hugging Face GPT-2 checkpoints: name mapping, single and sharded safetensors, config.json.
#include "zero/gpt2/checkpoint_hf.h"

#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "zero/checkpoint/safetensors.h"
#include "zero/core/error.h"

namespace zero::gpt2 {
namespace {

constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kSingleName = "model.safetensors";

// Where one Hugging Face tensor lives in the model: unit, slot, and its HF shape (wte unpadded).
struct TensorPlace {
  int unit;
  const TensorSlot* slot;
  std::vector<std::int64_t> hf_shape;
};

std::map<std::string, TensorPlace> tensor_places(const GPT2Model& model) {
  std::map<std::string, TensorPlace> places;
  for (int u = 0; u < model.num_units(); ++u) {
    const UnitSpec& unit = model.units()[u];
    for (const TensorSlot& slot : model.params(u).layout().slots()) {
      std::vector<std::int64_t> shape = slot.shape;
      if (slot.name == "wte.weight") shape[0] = model.config().vocab_size;
      places[hf_tensor_name(unit, slot.name)] = {u, &slot, shape};
    }
  }
  return places;
}

// The model's name for a stored name, or empty when the tensor is one to skip.
std::string canonical_name(const std::string& stored) {
  if (stored == "lm_head.weight" || stored.ends_with(".attn.bias") ||
      stored.ends_with(".attn.masked_bias"))
    return {};
  if (stored.starts_with("transformer.")) return stored;
  return "transformer." + stored;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::ostringstream text;
  text << "(";
  for (std::size_t i = 0; i < shape.size(); ++i) text << (i ? ", " : "") << shape[i];
  text << ")";
  return text.str();
}

std::vector<std::filesystem::path> weight_files(const std::filesystem::path& folder) {
  const std::filesystem::path index = folder / kIndexName;
  if (std::filesystem::exists(index)) {
    std::ifstream stream(index);
    nlohmann::json json;
    try {
      json = nlohmann::json::parse(stream);
    } catch (const nlohmann::json::exception& error) {
      ZERO_THROW(index.string(), " is not valid JSON: ", error.what());
    }
    ZERO_CHECK(json.contains("weight_map") && json["weight_map"].is_object(), index.string(),
               " has no weight_map object");
    std::set<std::string> files;
    for (auto& [name, file] : json["weight_map"].items()) {
      ZERO_CHECK(file.is_string(), index.string(), ": weight_map entry '", name,
                 "' is not a file name");
      files.insert(file.get<std::string>());
    }
    std::vector<std::filesystem::path> paths;
    for (const std::string& file : files) {
      ZERO_CHECK(file.find('/') == std::string::npos, index.string(), ": shard name '", file,
                 "' must be a plain file name");
      paths.push_back(folder / file);
    }
    return paths;
  }
  const std::filesystem::path single = folder / kSingleName;
  ZERO_CHECK(std::filesystem::exists(single), "no ", kSingleName, " or ", kIndexName, " in ",
             folder.string());
  return {single};
}

}  // namespace

GPT2Config load_hf_config(const std::filesystem::path& folder) {
  return GPT2Config::load(folder / "config.json");
}

void load_hf_weights(GPT2Model& model, const std::filesystem::path& folder) {
  const std::map<std::string, TensorPlace> places = tensor_places(model);
  std::set<std::string> loaded;
  for (const std::filesystem::path& file : weight_files(folder)) {
    const SafetensorsReader reader(file);
    for (const SafetensorsTensor& tensor : reader.tensors()) {
      const std::string name = canonical_name(tensor.name);
      if (name.empty()) continue;
      auto place = places.find(name);
      ZERO_CHECK(place != places.end(), file.string(), ": unexpected tensor '", tensor.name,
                 "' for a GPT-2 of ", model.config().n_layer, " layers");
      ZERO_CHECK(tensor.shape == place->second.hf_shape, file.string(), ": tensor '", tensor.name,
                 "' has shape ", shape_text(tensor.shape), ", the config needs ",
                 shape_text(place->second.hf_shape));
      ZERO_CHECK(loaded.insert(name).second, "tensor '", tensor.name, "' appears twice in ",
                 folder.string());
      float* destination =
          model.param_data(place->second.unit) + place->second.slot->offset_elements;
      reader.read_float(tensor.name, destination);
      // Rows of wte past the real vocabulary are zero.
      const std::size_t stored = tensor.num_elements();
      std::memset(destination + stored, 0,
                  (place->second.slot->num_elements - stored) * sizeof(float));
    }
  }
  for (const auto& [name, place] : places)
    ZERO_CHECK(loaded.contains(name), "checkpoint ", folder.string(), " lacks tensor '", name, "'");
}

GPT2Model load_hf_model(const std::filesystem::path& folder, Allocator& allocator) {
  GPT2Model model(load_hf_config(folder), allocator);
  load_hf_weights(model, folder);
  return model;
}

void save_hf_checkpoint(const GPT2Model& model, const std::filesystem::path& folder,
                        SaveOptions options) {
  std::filesystem::create_directories(folder);
  model.config().save(folder / "config.json");
  std::vector<SafetensorsWriter> shards(1);
  std::vector<std::vector<std::string>> shard_names(1);
  for (int u = 0; u < model.num_units(); ++u) {
    const UnitSpec& unit = model.units()[u];
    for (const TensorSlot& slot : model.params(u).layout().slots()) {
      std::vector<std::int64_t> shape = slot.shape;
      if (slot.name == "wte.weight") shape[0] = model.config().vocab_size;
      std::size_t count = 1;
      for (std::int64_t dimension : shape) count *= static_cast<std::size_t>(dimension);
      const std::size_t bytes = count * size_of(options.dtype);
      if (options.max_shard_bytes > 0 && shards.back().data_size_bytes() > 0 &&
          shards.back().data_size_bytes() + bytes > options.max_shard_bytes) {
        shards.emplace_back();
        shard_names.emplace_back();
      }
      const std::string name = hf_tensor_name(unit, slot.name);
      shards.back().add_float(name, options.dtype, shape,
                              model.param_data(u) + slot.offset_elements);
      shard_names.back().push_back(name);
    }
  }
  const std::size_t count = shards.size();
  if (options.max_shard_bytes == 0) {
    shards[0].set_metadata("format", "pt");
    shards[0].write(folder / kSingleName);
    std::filesystem::remove(folder / kIndexName);
    return;
  }
  nlohmann::ordered_json index;
  std::size_t total_bytes = 0;
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  for (std::size_t i = 0; i < count; ++i) {
    char file[64];
    std::snprintf(file, sizeof(file), "model-%05zu-of-%05zu.safetensors", i + 1, count);
    shards[i].set_metadata("format", "pt");
    shards[i].write(folder / file);
    total_bytes += shards[i].data_size_bytes();
    for (const std::string& name : shard_names[i]) weight_map[name] = file;
  }
  index["metadata"] = {{"total_size", total_bytes}};
  index["weight_map"] = weight_map;
  std::ofstream stream(folder / kIndexName);
  stream << index.dump(2) << "\n";
  ZERO_CHECK(stream.good(), "writing ", (folder / kIndexName).string(), " failed");
  std::filesystem::remove(folder / kSingleName);
}

}  // namespace zero::gpt2
