// A Hugging Face checkpoint's weights (GPT-2, Llama, Mistral, Qwen2: family.h) opened for
// streaming: model.safetensors or the shards model.safetensors.index.json lists, every header
// checked against the config before any value is read, then any range of any tensor read on
// demand (mapped, converted to fp32, its pages released), so a rank reads only its partition and
// never holds a whole file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "zero/checkpoint/safetensors.h"
#include "zero/core/flat_buffer.h"
#include "zero/core/partition.h"
#include "zero/gpt2/config.h"
#include "zero/gpt2/units.h"

namespace zero::gpt2 {

class HFWeights {
 public:
  // Opens <folder>'s weight files (headers only). Stored names may carry the family's prefix
  // ("transformer.": GPT2LMHeadModel; "model.": LlamaForCausalLM and its kin) or not (GPT2Model,
  // LlamaModel); the family's buffers (attn.bias/masked_bias, rotary_emb.inv_freq) and a tied
  // head's lm_head.weight are skipped; an untied head's lm_head.weight is a body tensor. `optional`
  // names tensors besides the body's that may be present (stored under exactly that name), with
  // their shapes (the classifier's score.weight). Throws zero::Error naming the file and tensor
  // for: no weight file, an index that is not JSON or lists a shard that does not exist or a tensor
  // its shard lacks, a truncated or corrupt file, a tensor the model does not have, a shape the
  // config does not give, a tensor stored twice, a body tensor missing.
  HFWeights(const std::filesystem::path& folder, const GPT2Config& config,
            std::map<std::string, std::vector<std::int64_t>> optional = {});

  const GPT2Config& config() const { return config_; }
  const std::filesystem::path& folder() const { return folder_; }
  // The files read (one, or the index's shards in name order).
  std::vector<std::filesystem::path> files() const;
  // The dtype the model's tensors are stored in: fp16 or bf16 when every one is, else fp32.
  DType stored_dtype() const;
  // Whether tensor `name` (the model's name, hf_tensor_name, or an optional one) is stored.
  bool contains(const std::string& name) const;
  // The stored names skipped that are not the family's buffers: lm_head.weight of a checkpoint
  // read into a tied model or a classifier's body (classifier_body), which Hugging Face reports
  // as weights of the checkpoint not used. In file order.
  const std::vector<std::string>& unused() const { return unused_; }

  // Values [range) of tensor `name` in the model's shape as fp32 into `out` (range.size()
  // values): a vocabulary matrix (is_vocabulary_matrix: wte, embed_tokens, lm_head) has the
  // model's padded_vocab_size rows, those past vocab_size read as zero.
  // Throws zero::Error when the tensor is not stored or the range is outside the model's tensor.
  void read(const std::string& name, ElementRange range, float* out) const;

  // Values [range) of `unit`'s flat parameters laid out by `layout` (the unit's tensors, as the
  // engine or GPT2Model lays them out) into `out` (range.size() values); elements no tensor
  // covers (padding) are zero. Reads only the stored bytes the range covers.
  void read_unit(const UnitSpec& unit, const FlatLayout& layout, ElementRange range,
                 float* out) const;

 private:
  struct Stored {
    std::size_t file;                // index into readers_
    std::size_t tensor;              // index into readers_[file].tensors()
    std::size_t model_num_elements;  // wte: padded rows included
  };
  std::filesystem::path folder_;
  GPT2Config config_;
  std::vector<SafetensorsReader> readers_;
  std::map<std::string, Stored> stored_;  // by the model's name
  std::vector<std::string> unused_;
};

// Host bytes a streaming load (HFWeights::read, load_hf_partitions) holds besides the values it
// fills, at most: one chunk of mapped pages per reading rank, for the planner's load phase.
inline constexpr std::size_t hf_load_buffer_bytes() { return SafetensorsReader::kStreamChunkBytes; }

// Hugging Face's weight file names (transformers' SAFE_WEIGHTS_NAME and SAFE_WEIGHTS_INDEX_NAME).
inline constexpr const char* kHfWeightsName = "model.safetensors";
inline constexpr const char* kHfWeightsIndexName = "model.safetensors.index.json";

// "(768, 2304)": a tensor shape as the errors about checkpoints name it.
std::string hf_shape_text(const std::vector<std::int64_t>& shape);

// The weight files of a checkpoint folder: model.safetensors, or the shards its index lists (each
// checked to exist, naming the index and a tensor the missing shard holds), in name order.
std::vector<std::filesystem::path> hf_weight_files(const std::filesystem::path& folder);

}  // namespace zero::gpt2
