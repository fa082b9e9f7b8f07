// Hugging Face checkpoints of every family (family.h): a folder with config.json and
// model.safetensors, or shards model-0000i-of-0000n.safetensors listed by
// model.safetensors.index.json, in the family's own names and layout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "zero/core/allocator.h"
#include "zero/core/dtype.h"
#include "zero/gpt2/model.h"

namespace zero::gpt2 {

// transformers' save_pretrained default, max_shard_size "5GB" (huggingface_hub's
// parse_size_to_int: 5·10^9 bytes).
inline constexpr std::size_t kHfMaxShardBytes = 5'000'000'000;

struct SaveOptions {
  DType dtype = DType::kFloat32;                   // stored dtype (fp32, fp16, bf16)
  std::size_t max_shard_bytes = kHfMaxShardBytes;  // 0: one model.safetensors whatever the size
};

// config.json's torch_dtype for weights stored as `dtype`: "float32", "bfloat16" or "float16"
// (what save_pretrained writes from the model's parameter dtype).
std::string_view torch_dtype_name(DType dtype);
// config.json's text for `config` with torch_dtype naming `dtype`.
std::string hf_config_text(const GPT2Config& config, DType dtype);

// Reads <folder>/config.json.
GPT2Config load_hf_config(const std::filesystem::path& folder);

// Loads every parameter from the folder's safetensors (single or sharded) into `model`, as
// HFWeights reads them (names with or without the family's prefix, buffers and a tied
// lm_head.weight skipped). Stored F32/F16/BF16 convert to fp32. A missing tensor, a shape that
// does not match the config or an unexpected tensor throws zero::Error naming it and the file.
void load_hf_weights(GPT2Model& model, const std::filesystem::path& folder);

// config.json + weights into a new model.
GPT2Model load_hf_model(const std::filesystem::path& folder, Allocator& allocator);

// Writes config.json and the weights under the family's Hugging Face names and layouts
// (GPT2LMHeadModel: Conv1D [in, out]; the Llama family: nn.Linear [out, in], lm_head.weight only
// when untied, as save_pretrained drops a tied head), vocabulary matrices unpadded (V, C),
// creating the folder. Existing files of the same names are replaced, each
// atomically (path.tmp, fsync, rename). The model's units go through the streaming form below.
void save_hf_checkpoint(const GPT2Model& model, const std::filesystem::path& folder,
                        SaveOptions options = {});

// Reads the checkpoint in `in` (config.json and weights, any family; HFWeights checks every
// tensor before anything is written) into the decoder's units one at a time
// (HFWeights::read_unit over the unit's layout) and writes each to `out` as save_hf_checkpoint
// does: re-sharded by options.max_shard_bytes, in options.dtype. Memory: one unit in fp32 besides
// the reader's chunk and the writer's buffers. Throws zero::Error when `in` and `out` are one
// folder.
void resave_hf_checkpoint(const std::filesystem::path& in, const std::filesystem::path& out,
                          SaveOptions options = {});

// The model.safetensors.index.json text save_hf_checkpoint writes for `config` under `options`,
// computed without writing anything; empty when the weights fit one model.safetensors.
std::string hf_index_json(const GPT2Config& config, SaveOptions options = {});

// One unit's flat parameters: at least units()[u].num_elements() values of `dtype` (fp32, fp16
// or bf16) in the unit's flat order (tensors back to back, wte padded to Vp rows), valid only
// during the call.
using UnitSink = std::function<void(const void* values, DType dtype)>;
// Hands unit u's parameters to the sink exactly once. Called for u = 0, 1, ..., L + 1 in order,
// each unit's tensors written before the next unit is asked for.
using UnitSource = std::function<void(int unit, const UnitSink& sink)>;

// save_hf_checkpoint one unit at a time: memory is what `source` holds for one unit plus the
// writer's buffers (kSafetensorsStreamBufferBytes), never the whole model. The same files, byte
// for byte, as save_hf_checkpoint of a GPT2Model holding the same (fp32-widened) parameters.
void save_hf_checkpoint(const GPT2Config& config, const UnitSource& source,
                        const std::filesystem::path& folder, SaveOptions options = {});

// Host bytes the unit-by-unit save holds besides what its source holds for one unit: the
// writer's buffers (kSafetensorsStreamBufferBytes) and the largest header, twice where a shard of
// one large tensor is written inside another shard's run.
std::size_t hf_save_buffer_bytes(const GPT2Config& config, SaveOptions options = {});

// A tensor written after the body's (the classifier's score.weight), fp32 values.
struct ExtraTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::span<const float> values;
};

// The weight files only (no config.json): the body's tensors from `source`, then `extra`, in
// options.dtype. Files as transformers 4.46's save_pretrained(max_shard_size) writes them:
// huggingface_hub's split_torch_state_dict_into_shards over the family's state-dict order
// (hf_state_dict_rank; a tensor larger than the limit alone in a shard); model.safetensors when one
// file holds all, else model-0000i-of-0000n.safetensors and model.safetensors.index.json
// (json.dumps(sort_keys=True, indent=2): metadata.total_size, weight_map). The other form and
// shard files of another count are removed. What save_hf_checkpoint and save_classifier_checkpoint
// write their weights with.
void write_hf_weights(const GPT2Config& config, const UnitSource& source,
                      std::span<const ExtraTensor> extra, const std::filesystem::path& folder,
                      SaveOptions options = {});

}  // namespace zero::gpt2
