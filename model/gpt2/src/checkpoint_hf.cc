// Hugging Face GPT-2 checkpoints: name mapping, single and sharded safetensors, config.json.
#include "zero/gpt2/checkpoint_hf.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "zero/checkpoint/durable_write.h"
#include "zero/checkpoint/safetensors.h"
#include "zero/core/error.h"
#include "zero/gpt2/hf_weights.h"

namespace zero::gpt2 {
namespace {

constexpr const char* kIndexName = kHfWeightsIndexName;
constexpr const char* kSingleName = kHfWeightsName;

// One tensor of a saved file: where its values come from (unit, or extra tensor -1 - k) and
// which file it goes to.
struct PlannedTensor {
  int unit;
  std::size_t offset_elements;  // in the unit's flat parameters (0 for extra tensors)
  std::size_t num_elements;
  std::string name;
  std::vector<std::int64_t> shape;
  std::size_t file;
};

// Every tensor in file order, split into files as the whole-model writer always has: a new shard
// when the current one holds data and this tensor would take it past max_shard_bytes.
std::vector<PlannedTensor> plan_tensors(const GPT2Config& config,
                                        std::span<const ExtraTensor> extra,
                                        const SaveOptions& options) {
  std::vector<PlannedTensor> tensors;
  std::size_t file = 0, file_bytes = 0;
  auto add = [&](PlannedTensor tensor) {
    const std::size_t bytes = tensor.num_elements * size_of(options.dtype);
    if (options.max_shard_bytes > 0 && file_bytes > 0 &&
        file_bytes + bytes > options.max_shard_bytes) {
      ++file;
      file_bytes = 0;
    }
    file_bytes += bytes;
    tensor.file = file;
    tensors.push_back(std::move(tensor));
  };
  const std::vector<UnitSpec> units = gpt2_units(config);
  for (int u = 0; u < static_cast<int>(units.size()); ++u) {
    const FlatLayout layout(units[u].tensors, 1, 16);
    for (const TensorSlot& slot : layout.slots()) {
      std::vector<std::int64_t> shape = slot.shape;
      if (slot.name == "wte.weight") shape[0] = config.vocab_size;
      std::size_t count = 1;
      for (std::int64_t dimension : shape) count *= static_cast<std::size_t>(dimension);
      add({u, slot.offset_elements, count, hf_tensor_name(units[u], slot.name), shape, 0});
    }
  }
  for (std::size_t k = 0; k < extra.size(); ++k) {
    std::size_t count = 1;
    for (std::int64_t dimension : extra[k].shape) count *= static_cast<std::size_t>(dimension);
    ZERO_CHECK(count == extra[k].values.size(), "tensor '", extra[k].name, "' has ",
               extra[k].values.size(), " values, its shape ", hf_shape_text(extra[k].shape),
               " needs ", count);
    add({-1 - static_cast<int>(k), 0, count, extra[k].name, extra[k].shape, 0});
  }
  return tensors;
}

// The planned files written in order, one open at a time: a unit's values go to its tensors'
// files, each file finished (fsync, rename) once its last tensor is written.
class ShardStream {
 public:
  ShardStream(const std::vector<PlannedTensor>& tensors, const std::vector<std::string>& files,
              const std::filesystem::path& folder, SafetensorsDType dtype)
      : tensors_(tensors), files_(files), folder_(folder), dtype_(dtype) {}

  // Every tensor of unit `unit` (or extra tensor -1 - k), from `values` of `dtype`.
  void write_unit(int unit, const void* values, DType dtype) {
    const std::byte* bytes = static_cast<const std::byte*>(values);
    bool any = false;
    for (; next_ < tensors_.size() && tensors_[next_].unit == unit; ++next_) {
      const PlannedTensor& tensor = tensors_[next_];
      if (!writer_) open(tensor.file);
      writer_->write_converted(tensor.name, bytes + tensor.offset_elements * size_of(dtype), dtype,
                               tensor.num_elements);
      total_data_bytes_ += tensor.num_elements * size_of(dtype_);
      if (next_ + 1 == tensors_.size() || tensors_[next_ + 1].file != tensor.file) {
        writer_->finish();
        writer_.reset();
      }
      any = true;
    }
    ZERO_CHECK(any || unit < 0, "unit ", unit, " given out of order");
  }
  void finish() {
    ZERO_CHECK(next_ == tensors_.size() && !writer_, "saving ", folder_.string(), ": ",
               tensors_.size() - next_, " tensors were never given");
  }
  std::size_t total_data_bytes() const { return total_data_bytes_; }

 private:
  void open(std::size_t file) {
    std::vector<SafetensorsEntry> entries;
    for (const PlannedTensor& tensor : tensors_)
      if (tensor.file == file) entries.push_back({tensor.name, dtype_, tensor.shape});
    writer_.emplace(folder_ / files_[file], entries,
                    std::map<std::string, std::string>{{"format", "pt"}});
  }
  const std::vector<PlannedTensor>& tensors_;
  const std::vector<std::string>& files_;
  std::filesystem::path folder_;
  SafetensorsDType dtype_;
  std::size_t next_ = 0;
  std::optional<SafetensorsStreamWriter> writer_;
  std::size_t total_data_bytes_ = 0;
};

}  // namespace

GPT2Config load_hf_config(const std::filesystem::path& folder) {
  return GPT2Config::load(folder / "config.json");
}

void load_hf_weights(GPT2Model& model, const std::filesystem::path& folder) {
  const HFWeights weights(folder, model.config());
  for (int u = 0; u < model.num_units(); ++u) {
    const FlatLayout& layout = model.params(u).layout();
    weights.read_unit(model.units()[u], layout, {0, layout.num_elements()}, model.param_data(u));
  }
}

GPT2Model load_hf_model(const std::filesystem::path& folder, Allocator& allocator) {
  GPT2Model model(load_hf_config(folder), allocator);
  load_hf_weights(model, folder);
  return model;
}

void save_hf_checkpoint(const GPT2Model& model, const std::filesystem::path& folder,
                        SaveOptions options) {
  save_hf_checkpoint(
      model.config(),
      [&model](int unit, const UnitSink& sink) { sink(model.param_data(unit), DType::kFloat32); },
      folder, options);
}

void save_hf_checkpoint(const GPT2Config& config, const UnitSource& source,
                        const std::filesystem::path& folder, SaveOptions options) {
  std::filesystem::create_directories(folder);
  config.save(folder / "config.json");
  write_hf_weights(config, source, {}, folder, options);
}

std::size_t hf_save_buffer_bytes(const GPT2Config& config, SaveOptions options) {
  const std::vector<PlannedTensor> tensors = plan_tensors(config, {}, options);
  std::size_t largest_header = 0;
  for (std::size_t file = 0; !tensors.empty() && file <= tensors.back().file; ++file) {
    std::vector<SafetensorsEntry> entries;
    for (const PlannedTensor& tensor : tensors)
      if (tensor.file == file)
        entries.push_back({tensor.name, safetensors_dtype(options.dtype), tensor.shape});
    largest_header = std::max(
        largest_header, safetensors_header(safetensors_layout(entries), {{"format", "pt"}}).size());
  }
  return kSafetensorsStreamBufferBytes + largest_header;
}

void write_hf_weights(const GPT2Config& config, const UnitSource& source,
                      std::span<const ExtraTensor> extra, const std::filesystem::path& folder,
                      SaveOptions options) {
  const std::vector<PlannedTensor> tensors = plan_tensors(config, extra, options);
  const std::size_t count = tensors.empty() ? 1 : tensors.back().file + 1;
  std::vector<std::string> files(count, kSingleName);
  if (options.max_shard_bytes > 0)
    for (std::size_t i = 0; i < count; ++i) {
      char file[64];
      std::snprintf(file, sizeof(file), "model-%05zu-of-%05zu.safetensors", i + 1, count);
      files[i] = file;
    }
  ShardStream stream(tensors, files, folder, safetensors_dtype(options.dtype));
  const std::vector<UnitSpec> units = gpt2_units(config);
  for (int u = 0; u < static_cast<int>(units.size()); ++u) {
    bool given = false;
    source(u, [&](const void* values, DType dtype) {
      ZERO_CHECK(!given, "the unit source gave unit '", units[u].name, "' twice");
      given = true;
      stream.write_unit(u, values, dtype);
    });
    ZERO_CHECK(given, "the unit source gave no values for unit '", units[u].name, "'");
  }
  for (const ExtraTensor& tensor : extra)
    stream.write_unit(-1 - static_cast<int>(&tensor - extra.data()), tensor.values.data(),
                      DType::kFloat32);
  stream.finish();
  if (options.max_shard_bytes == 0) {
    std::filesystem::remove(folder / kIndexName);
    return;
  }
  nlohmann::ordered_json index;
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  for (const PlannedTensor& tensor : tensors) weight_map[tensor.name] = files[tensor.file];
  index["metadata"] = {{"total_size", stream.total_data_bytes()}};
  index["weight_map"] = weight_map;
  checkpoint::write_file_atomically(folder / kIndexName, index.dump(2) + "\n");
  std::filesystem::remove(folder / kSingleName);
}

}  // namespace zero::gpt2
