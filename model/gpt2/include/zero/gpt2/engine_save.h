// The Hugging Face model saved straight from the engine, one unit at a time: each unit is gathered
// on every rank in turn and rank 0 writes its tensors before the next is gathered, so the save
// needs the engine's one gathered unit and the writer's buffers (kSafetensorsStreamBufferBytes),
// never a whole model outside the engine.
#pragma once

#include <filesystem>
#include <span>

#include "zero/gpt2/checkpoint_hf.h"
#include "zero/gpt2/engine_classifier.h"
#include "zero/gpt2/engine_model.h"

namespace zero::gpt2 {

// All ranks, in the same order (a collective): gathers embeddings, h.0 .. h.(L-1), ln_f; rank 0
// writes folder/config.json and the weights in options.dtype. fp32 (the default): the parameters
// of an fp32 run and the fp32 masters of a 16-bit run (Engine::gather_master, never the 16-bit
// copy widened), as Hugging Face's Trainer saves under autocast mixed precision. bf16/fp16: the
// parameters the model computes with (a 16-bit run's 16-bit copy, as Trainer under DeepSpeed
// saves its module's 16-bit weights), config.json's torch_dtype naming the dtype. The same
// files, byte for byte, as save_hf_checkpoint of the whole model holding those values. When
// rank 0's write fails it still gathers the remaining units (no rank is left in a collective),
// then throws the error naming the file.
void save_hf_checkpoint(EngineModel& model, const std::filesystem::path& folder,
                        SaveOptions options = {});

// The same for `config`'s units registered with `engine` as `units` (gpt2_units(config) order)
// without an EngineModel: the Llama family's units before its passes exist. All ranks.
void save_hf_checkpoint(Engine& engine, std::span<const UnitId> units, const GPT2Config& config,
                        const std::filesystem::path& folder, SaveOptions options = {});

// What a rank other than 0 does in a save of `units` in `saved` dtype: takes part in each unit's
// gather (the fp32 master of an fp32 save in 16-bit training, else the parameters) and drops it.
// All ranks, same order; the planner replays it for the checkpoints' and final save's phases.
void gather_saved_units(Engine& engine, std::span<const UnitId> units,
                        DType saved = DType::kFloat32);

// All ranks: score.weight gathered first (K × C values kept), then the body as above; rank 0
// writes the ...ForSequenceClassification folder save_classifier_checkpoint writes, in
// options.dtype as above.
void save_classifier_checkpoint(EngineClassifier& model, const std::filesystem::path& folder,
                                SaveOptions options = {});

}  // namespace zero::gpt2
