// Hugging Face GPT-2 checkpoints: a folder with config.json and model.safetensors, or shards
// model-0000i-of-0000n.safetensors listed by model.safetensors.index.json.
#pragma once

#include <cstddef>
#include <filesystem>

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
// wte unpadded (V, C)), creating the folder. Existing files of the same names are replaced.
void save_hf_checkpoint(const GPT2Model& model, const std::filesystem::path& folder,
                        SaveOptions options = {});

}  // namespace zero::gpt2
