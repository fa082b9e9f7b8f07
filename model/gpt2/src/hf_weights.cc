// HFWeights: a Hugging Face checkpoint's tensors (any family, family.h) checked up front, read
// range by range.
#include "zero/gpt2/hf_weights.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "zero/core/error.h"
#include "zero/gpt2/family.h"

namespace zero::gpt2 {
namespace {

namespace fs = std::filesystem;

constexpr const char* kIndexName = kHfWeightsIndexName;
constexpr const char* kSingleName = kHfWeightsName;

// The index's weight_map: tensor name -> shard file name.
std::map<std::string, std::string> read_weight_map(const fs::path& index) {
  std::ifstream stream(index);
  ZERO_CHECK(stream.good(), "cannot read ", index.string());
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(stream);
  } catch (const nlohmann::json::exception& error) {
    ZERO_THROW(index.string(), " is not valid JSON: ", error.what());
  }
  ZERO_CHECK(json.is_object() && json.contains("weight_map") && json["weight_map"].is_object(),
             index.string(), " has no weight_map object");
  std::map<std::string, std::string> weight_map;
  for (const auto& [name, file] : json["weight_map"].items()) {
    ZERO_CHECK(file.is_string(), index.string(), ": weight_map entry '", name,
               "' is not a file name");
    const std::string shard = file.get<std::string>();
    ZERO_CHECK(!shard.empty() && shard.find('/') == std::string::npos, index.string(),
               ": weight_map entry '", name, "' names shard '", shard, "', not a plain file name");
    weight_map[name] = shard;
  }
  ZERO_CHECK(!weight_map.empty(), index.string(), ": weight_map is empty");
  return weight_map;
}

// The model's name for a stored name, or empty when the tensor is one to skip: the family's
// buffers, and lm_head.weight of a tied head (transformers does not save it; some files hold it).
// Names may lack the family's prefix (GPT2Model, LlamaModel: the decoder without its head).
std::string canonical_name(const std::string& stored, const GPT2Config& config,
                           const std::map<std::string, std::vector<std::int64_t>>& optional) {
  if (is_hf_buffer(config.family, stored)) return {};
  if (stored == "lm_head.weight") return config.tie_word_embeddings ? std::string() : stored;
  const std::string_view prefix = family_spec(config.family).hf_prefix;
  if (optional.contains(stored) || stored.starts_with(prefix)) return stored;
  return std::string(prefix) + stored;
}

}  // namespace

std::string hf_shape_text(const std::vector<std::int64_t>& shape) {
  std::ostringstream text;
  text << "(";
  for (std::size_t i = 0; i < shape.size(); ++i) text << (i ? ", " : "") << shape[i];
  text << ")";
  return text.str();
}

std::vector<fs::path> hf_weight_files(const fs::path& folder) {
  const fs::path index = folder / kIndexName;
  if (!fs::exists(index)) {
    ZERO_CHECK(fs::exists(folder / kSingleName), "no ", kSingleName, " or ", kIndexName, " in ",
               folder.string());
    return {folder / kSingleName};
  }
  std::map<std::string, std::string> first_tensor;  // shard -> a tensor the index puts there
  for (const auto& [name, shard] : read_weight_map(index)) first_tensor.emplace(shard, name);
  std::vector<fs::path> paths;
  for (const auto& [shard, tensor] : first_tensor) {
    ZERO_CHECK(fs::is_regular_file(folder / shard), index.string(), " lists shard '", shard,
               "' (holding tensor '", tensor, "'), but ", (folder / shard).string(),
               " does not exist");
    paths.push_back(folder / shard);
  }
  return paths;
}

HFWeights::HFWeights(const fs::path& folder, const GPT2Config& config,
                     std::map<std::string, std::vector<std::int64_t>> optional)
    : folder_(folder), config_(config) {
  // Every tensor the model has, with its stored (HF) shape and its size in the model.
  struct Expected {
    std::vector<std::int64_t> shape;
    std::size_t model_num_elements;
  };
  std::map<std::string, Expected> expected;
  for (const UnitSpec& unit : gpt2_units(config))
    for (const TensorSpec& tensor : unit.tensors) {
      std::vector<std::int64_t> shape = tensor.shape;
      if (is_vocabulary_matrix(config.family, tensor.name)) shape[0] = config.vocab_size;
      expected[hf_tensor_name(unit, tensor.name)] = {shape, tensor.num_elements()};
    }
  for (const auto& [name, shape] : optional) {
    const TensorSpec spec{name, shape};
    expected[name] = {shape, spec.num_elements()};
  }
  const fs::path index = folder / kIndexName;
  const bool sharded = fs::exists(index);
  const std::map<std::string, std::string> weight_map =
      sharded ? read_weight_map(index) : std::map<std::string, std::string>{};
  for (const fs::path& file : hf_weight_files(folder)) {
    readers_.emplace_back(file, /*load_data=*/false);
    const SafetensorsReader& reader = readers_.back();
    for (std::size_t t = 0; t < reader.tensors().size(); ++t) {
      const SafetensorsTensor& tensor = reader.tensors()[t];
      const std::string name = canonical_name(tensor.name, config, optional);
      if (name.empty()) {
        if (!is_hf_buffer(config.family, tensor.name)) unused_.push_back(tensor.name);
        continue;
      }
      const auto place = expected.find(name);
      ZERO_CHECK(place != expected.end(), file.string(), ": unexpected tensor '", tensor.name,
                 "' for a ", name_of(config.family), " of ", config.n_layer, " layers");
      ZERO_CHECK(tensor.shape == place->second.shape, file.string(), ": tensor '", tensor.name,
                 "' has shape ", hf_shape_text(tensor.shape), ", the config needs ",
                 hf_shape_text(place->second.shape));
      const auto [previous, inserted] =
          stored_.emplace(name, Stored{readers_.size() - 1, t, place->second.model_num_elements});
      ZERO_CHECK(inserted, "tensor '", tensor.name, "' is stored twice: in ",
                 readers_[previous->second.file].path().string(), " and in ", file.string());
    }
  }
  for (const auto& [name, shard] : weight_map) {
    const fs::path path = folder / shard;
    const auto reader = std::find_if(readers_.begin(), readers_.end(),
                                     [&](const SafetensorsReader& r) { return r.path() == path; });
    ZERO_CHECK(reader != readers_.end() && reader->contains(name), index.string(), " puts tensor '",
               name, "' in ", path.string(), ", which has no such tensor");
  }
  for (const auto& [name, place] : expected) {
    if (optional.contains(name) || stored_.contains(name)) continue;
    if (sharded)
      ZERO_THROW("checkpoint ", folder.string(), " lacks tensor '", name, "': neither ",
                 index.string(), " nor its ", readers_.size(), " shards hold it");
    ZERO_THROW("checkpoint ", folder.string(), " lacks tensor '", name,
               "': ", readers_.front().path().string(), " does not hold it");
  }
}

std::vector<fs::path> HFWeights::files() const {
  std::vector<fs::path> paths;
  for (const SafetensorsReader& reader : readers_) paths.push_back(reader.path());
  return paths;
}

DType HFWeights::stored_dtype() const {
  std::set<SafetensorsDType> dtypes;
  for (const auto& [name, stored] : stored_)
    dtypes.insert(readers_[stored.file].tensors()[stored.tensor].dtype);
  if (dtypes == std::set{SafetensorsDType::kBF16}) return DType::kBFloat16;
  if (dtypes == std::set{SafetensorsDType::kF16}) return DType::kFloat16;
  return DType::kFloat32;
}

bool HFWeights::contains(const std::string& name) const { return stored_.contains(name); }

void HFWeights::read(const std::string& name, ElementRange range, float* out) const {
  const auto found = stored_.find(name);
  ZERO_CHECK(found != stored_.end(), "checkpoint ", folder_.string(), " has no tensor '", name,
             "'");
  const Stored& stored = found->second;
  ZERO_CHECK(range.begin <= range.end && range.end <= stored.model_num_elements, "checkpoint ",
             folder_.string(), ": values [", range.begin, ", ", range.end, ") are outside tensor '",
             name, "' of ", stored.model_num_elements, " values");
  const SafetensorsReader& reader = readers_[stored.file];
  const SafetensorsTensor& tensor = reader.tensors()[stored.tensor];
  // Values past the stored ones (wte's padded rows) are zero.
  const std::size_t stored_end = std::min(range.end, tensor.num_elements());
  const std::size_t from_file = stored_end > range.begin ? stored_end - range.begin : 0;
  if (from_file > 0) reader.read_float(tensor, range.begin, from_file, out);
  std::fill(out + from_file, out + range.size(), 0.0f);
}

void HFWeights::read_unit(const UnitSpec& unit, const FlatLayout& layout, ElementRange range,
                          float* out) const {
  std::size_t covered = range.begin;  // elements before this are written
  for (const TensorSlot& slot : layout.slots()) {
    const ElementRange overlap = intersect(slot.range(), range);
    if (overlap.empty()) continue;
    std::fill(out + (covered - range.begin), out + (overlap.begin - range.begin), 0.0f);
    read(hf_tensor_name(unit, slot.name),
         {overlap.begin - slot.offset_elements, overlap.end - slot.offset_elements},
         out + (overlap.begin - range.begin));
    covered = overlap.end;
  }
  if (covered < range.end) std::fill(out + (covered - range.begin), out + range.size(), 0.0f);
}

}  // namespace zero::gpt2
