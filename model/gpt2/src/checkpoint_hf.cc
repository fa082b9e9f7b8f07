// Hugging Face checkpoints of every family: name mapping, single and sharded safetensors,
// config.json.
#include "zero/gpt2/checkpoint_hf.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "zero/checkpoint/durable_write.h"
#include "zero/checkpoint/safetensors.h"
#include "zero/core/error.h"
#include "zero/gpt2/family.h"
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

// Files to tensors as huggingface_hub's split_torch_state_dict_into_shards assigns them for
// transformers' save_pretrained, over the tensors in state-dict order: a tensor larger than
// max_shard_bytes gets a shard of its own, numbered when it is met; the others fill the current
// shard, which is closed (and numbered) when the next tensor would take it past max_shard_bytes.
// max_shard_bytes 0: one file.
void assign_files(std::vector<PlannedTensor>& tensors, const SaveOptions& options) {
  const std::size_t limit = options.max_shard_bytes;
  std::size_t files = 0, current_bytes = 0;
  std::vector<PlannedTensor*> current;
  auto close_current = [&] {
    for (PlannedTensor* tensor : current) tensor->file = files;
    files += current.empty() ? 0 : 1;
    current.clear();
    current_bytes = 0;
  };
  for (PlannedTensor& tensor : tensors) {
    const std::size_t bytes = tensor.num_elements * size_of(options.dtype);
    if (limit > 0 && bytes > limit) {
      tensor.file = files++;
      continue;
    }
    if (limit > 0 && current_bytes + bytes > limit) close_current();
    current.push_back(&tensor);
    current_bytes += bytes;
  }
  close_current();
}

// Every tensor in the family's state-dict order (hf_state_dict_rank within each unit, units in
// order, then `extra`), vocabulary matrices unpadded, each assigned its file.
std::vector<PlannedTensor> plan_tensors(const GPT2Config& config,
                                        std::span<const ExtraTensor> extra,
                                        const SaveOptions& options) {
  std::vector<PlannedTensor> tensors;
  const std::vector<UnitSpec> units = gpt2_units(config);
  for (int u = 0; u < static_cast<int>(units.size()); ++u) {
    const FlatLayout layout(units[u].tensors, 1, 16);
    std::vector<TensorSlot> slots = layout.slots();
    std::stable_sort(slots.begin(), slots.end(), [&](const TensorSlot& a, const TensorSlot& b) {
      return hf_state_dict_rank(config.family, a.name) < hf_state_dict_rank(config.family, b.name);
    });
    for (const TensorSlot& slot : slots) {
      std::vector<std::int64_t> shape = slot.shape;
      if (is_vocabulary_matrix(config.family, slot.name)) shape[0] = config.vocab_size;
      const TensorSpec stored{slot.name, shape};
      tensors.push_back({u, slot.offset_elements, stored.num_elements(),
                         hf_tensor_name(units[u], slot.name), shape, 0});
    }
  }
  for (std::size_t k = 0; k < extra.size(); ++k) {
    const TensorSpec stored{extra[k].name, extra[k].shape};
    ZERO_CHECK(stored.num_elements() == extra[k].values.size(), "tensor '", extra[k].name, "' has ",
               extra[k].values.size(), " values, its shape ", hf_shape_text(extra[k].shape),
               " needs ", stored.num_elements());
    tensors.push_back(
        {-1 - static_cast<int>(k), 0, stored.num_elements(), extra[k].name, extra[k].shape, 0});
  }
  assign_files(tensors, options);
  return tensors;
}

std::size_t num_files(const std::vector<PlannedTensor>& tensors) {
  std::size_t count = 1;
  for (const PlannedTensor& tensor : tensors) count = std::max(count, tensor.file + 1);
  return count;
}

// The planned files' names: model.safetensors alone, else model-0000i-of-0000n.safetensors.
std::vector<std::string> file_names(std::size_t count) {
  if (count == 1) return {kSingleName};
  std::vector<std::string> files(count);
  for (std::size_t i = 0; i < count; ++i) {
    char file[64];
    std::snprintf(file, sizeof(file), "model-%05zu-of-%05zu.safetensors", i + 1, count);
    files[i] = file;
  }
  return files;
}

// The header entries of file `file`, in plan order (the order its tensors are written).
std::vector<SafetensorsEntry> file_entries(const std::vector<PlannedTensor>& tensors,
                                           std::size_t file, SafetensorsDType dtype) {
  std::vector<SafetensorsEntry> entries;
  for (const PlannedTensor& tensor : tensors)
    if (tensor.file == file) entries.push_back({tensor.name, dtype, tensor.shape});
  return entries;
}

// The planned files written as the units arrive: a unit's values go to its tensors' files, each
// file opened at its first tensor and finished (fsync, rename) at its last. Two files are open at
// once only while a shard of one large tensor is written inside another shard's run.
class ShardStream {
 public:
  ShardStream(const std::vector<PlannedTensor>& tensors, const std::vector<std::string>& files,
              const std::filesystem::path& folder, SafetensorsDType dtype)
      : tensors_(tensors), files_(files), folder_(folder), dtype_(dtype), left_(files.size()) {
    for (const PlannedTensor& tensor : tensors_) ++left_[tensor.file];
  }

  // Every tensor of unit `unit` (or extra tensor -1 - k), from `values` of `dtype`.
  void write_unit(int unit, const void* values, DType dtype) {
    const std::byte* bytes = static_cast<const std::byte*>(values);
    bool any = false;
    for (; next_ < tensors_.size() && tensors_[next_].unit == unit; ++next_) {
      const PlannedTensor& tensor = tensors_[next_];
      auto writer = open_.find(tensor.file);
      if (writer == open_.end())
        writer =
            open_
                .emplace(tensor.file, SafetensorsStreamWriter(
                                          folder_ / files_[tensor.file],
                                          file_entries(tensors_, tensor.file, dtype_),
                                          std::map<std::string, std::string>{{"format", "pt"}}))
                .first;
      writer->second.write_converted(tensor.name, bytes + tensor.offset_elements * size_of(dtype),
                                     dtype, tensor.num_elements);
      if (--left_[tensor.file] == 0) {
        writer->second.finish();
        open_.erase(writer);
      }
      any = true;
    }
    ZERO_CHECK(any || unit < 0, "unit ", unit, " given out of order");
  }
  void finish() {
    ZERO_CHECK(next_ == tensors_.size() && open_.empty(), "saving ", folder_.string(), ": ",
               tensors_.size() - next_, " tensors were never given");
  }

 private:
  const std::vector<PlannedTensor>& tensors_;
  const std::vector<std::string>& files_;
  std::filesystem::path folder_;
  SafetensorsDType dtype_;
  std::vector<std::size_t> left_;  // per file: tensors not yet written
  std::size_t next_ = 0;
  std::map<std::size_t, SafetensorsStreamWriter> open_;
};

// Removes shard files of an earlier save that this one did not write (as save_pretrained does):
// model-0000i-of-0000n.safetensors of another n.
void remove_stale_shards(const std::filesystem::path& folder,
                         const std::vector<std::string>& written) {
  static const std::regex kShard(R"(model-\d{5}-of-\d{5}\.safetensors)");
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && std::regex_match(name, kShard) &&
        std::find(written.begin(), written.end(), name) == written.end())
      std::filesystem::remove(entry.path());
  }
}

// The index save_pretrained writes (json.dumps(index, indent=2, sort_keys=True) + "\n"), empty
// for one file.
std::string index_json(const std::vector<PlannedTensor>& tensors,
                       const std::vector<std::string>& files, SafetensorsDType dtype) {
  if (files.size() == 1) return {};
  nlohmann::json index;
  std::size_t total_bytes = 0;
  for (const PlannedTensor& tensor : tensors) {
    index["weight_map"][tensor.name] = files[tensor.file];
    total_bytes += tensor.num_elements * size_of(dtype);
  }
  index["metadata"]["total_size"] = total_bytes;
  return index.dump(2) + "\n";
}

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

std::string_view torch_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat16: return "float16";
    default: return "float32";
  }
}

std::string hf_config_text(const GPT2Config& config, DType dtype) {
  nlohmann::ordered_json json = nlohmann::ordered_json::parse(config.to_json_text());
  json["torch_dtype"] = torch_dtype_name(dtype);
  return json.dump(2) + "\n";
}

void save_hf_checkpoint(const GPT2Config& config, const UnitSource& source,
                        const std::filesystem::path& folder, SaveOptions options) {
  std::filesystem::create_directories(folder);
  if (options.dtype == DType::kFloat32)
    config.save(folder / "config.json");
  else
    checkpoint::write_file_atomically(folder / "config.json",
                                      hf_config_text(config, options.dtype));
  write_hf_weights(config, source, {}, folder, options);
}

void resave_hf_checkpoint(const std::filesystem::path& in, const std::filesystem::path& out,
                          SaveOptions options) {
  ZERO_CHECK(!std::filesystem::exists(out) || !std::filesystem::equivalent(in, out),
             "cannot save checkpoint ", in.string(), " over itself (", out.string(),
             "): give another folder");
  const GPT2Config config = load_hf_config(in);
  const HFWeights weights(in, config);
  const std::vector<UnitSpec> units = gpt2_units(config);
  std::vector<float> values;  // one unit at a time
  save_hf_checkpoint(
      config,
      [&](int unit, const UnitSink& sink) {
        const UnitSpec& spec = units[static_cast<std::size_t>(unit)];
        const FlatLayout layout(spec.tensors, 1, 16);
        values.resize(layout.num_elements());
        weights.read_unit(spec, layout, {0, layout.num_elements()}, values.data());
        sink(values.data(), DType::kFloat32);
      },
      out, options);
}

std::string hf_index_json(const GPT2Config& config, SaveOptions options) {
  const std::vector<PlannedTensor> tensors = plan_tensors(config, {}, options);
  return index_json(tensors, file_names(num_files(tensors)), safetensors_dtype(options.dtype));
}

std::size_t hf_save_buffer_bytes(const GPT2Config& config, SaveOptions options) {
  const std::vector<PlannedTensor> tensors = plan_tensors(config, {}, options);
  const std::size_t count = num_files(tensors);
  std::vector<std::size_t> headers(count);
  for (std::size_t file = 0; file < count; ++file)
    headers[file] =
        safetensors_header(
            safetensors_layout(file_entries(tensors, file, safetensors_dtype(options.dtype))),
            {{"format", "pt"}})
            .size();
  // A shard of one large tensor is written while the shard around it is open: two writers.
  std::vector<std::size_t> first(count, tensors.size()), last(count, 0);
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    first[tensors[t].file] = std::min(first[tensors[t].file], t);
    last[tensors[t].file] = t;
  }
  std::size_t peak = 0;
  for (std::size_t file = 0; file < count; ++file) {
    std::size_t bytes = kSafetensorsStreamBufferBytes + headers[file];
    for (std::size_t inner = 0; inner < count; ++inner)
      if (inner != file && first[inner] > first[file] && last[inner] < last[file])
        bytes = std::max(bytes, 2 * kSafetensorsStreamBufferBytes + headers[file] + headers[inner]);
    peak = std::max(peak, bytes);
  }
  return peak;
}

void write_hf_weights(const GPT2Config& config, const UnitSource& source,
                      std::span<const ExtraTensor> extra, const std::filesystem::path& folder,
                      SaveOptions options) {
  const std::vector<PlannedTensor> tensors = plan_tensors(config, extra, options);
  const std::vector<std::string> files = file_names(num_files(tensors));
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
  remove_stale_shards(folder, files);
  if (files.size() == 1) {
    std::filesystem::remove(folder / kIndexName);
    return;
  }
  checkpoint::write_file_atomically(folder / kIndexName,
                                    index_json(tensors, files, safetensors_dtype(options.dtype)));
  std::filesystem::remove(folder / kSingleName);
}

}  // namespace zero::gpt2
