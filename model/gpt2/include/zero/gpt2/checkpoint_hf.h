// Hugging Face GPT-2 checkpoints: a folder with config.json and model.safetensors, or shards
// model-0000i-of-0000n.safetensors listed by model.safetensors.index.json.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "zero/core/allocator.h"
#include "zero/core/dtype.h"
#include "zero/gpt2/model.h"

namespace zero::gpt2 {

struct SaveOptions {
  DType dtype = DType::kFloat32;    // stored dtype (fp32, fp16, bf16)
  std::size_t max_shard_bytes = 0;  // 0: one model.safetensors; else shards of at most this
                                    // (a tensor larger than it gets a shard of its own)
};

// Reads <folder>/config.json.
GPT2Config load_hf_config(const std::filesystem::path& folder);

// Loads every parameter from the folder's safetensors (single or sharded) into `model`. Names may
// carry the "transformer." prefix (GPT2LMHeadModel) or not (GPT2Model); attn.bias/masked_bias
// buffers and the tied lm_head.weight are skipped. Stored F32/F16/BF16 convert to fp32. A missing
// tensor, a shape that does not match the config or an unexpected tensor throws zero::Error.
void load_hf_weights(GPT2Model& model, const std::filesystem::path& folder);

// config.json + weights into a new model.
GPT2Model load_hf_model(const std::filesystem::path& folder, Allocator& allocator);

// Writes config.json and the weights under Hugging Face names (GPT2LMHeadModel, Conv1D [in, out],
// wte unpadded (V, C)), creating the folder. Existing files of the same names are replaced, each
// atomically (path.tmp, fsync, rename). The model's units go through the streaming form below.
void save_hf_checkpoint(const GPT2Model& model, const std::filesystem::path& folder,
                        SaveOptions options = {});

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
// writer's buffers (kSafetensorsStreamBufferBytes) and the largest file's header.
std::size_t hf_save_buffer_bytes(const GPT2Config& config, SaveOptions options = {});

// A tensor written after the body's (the classifier's score.weight), fp32 values.
struct ExtraTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::span<const float> values;
};

// The weight files only (no config.json): the body's tensors from `source`, then `extra`, in
// options.dtype, into model.safetensors or shards + model.safetensors.index.json (the other form
// removed). What save_hf_checkpoint and save_classifier_checkpoint write their weights with.
void write_hf_weights(const GPT2Config& config, const UnitSource& source,
                      std::span<const ExtraTensor> extra, const std::filesystem::path& folder,
                      SaveOptions options = {});

}  // namespace zero::gpt2
