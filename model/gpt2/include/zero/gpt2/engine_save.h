// The Hugging Face model saved straight from the engine, one unit at a time: each unit is gathered
// on every rank in turn and rank 0 writes its tensors before the next is gathered, so the save
// needs the engine's one gathered unit and the writer's buffers (kSafetensorsStreamBufferBytes),
// never a whole model outside the engine.
#pragma once

#include <filesystem>

#include "zero/gpt2/checkpoint_hf.h"
#include "zero/gpt2/engine_classifier.h"
#include "zero/gpt2/engine_model.h"

namespace zero::gpt2 {

// All ranks, in the same order (a collective): gathers embeddings, h.0 .. h.(L-1), ln_f; rank 0
// writes folder/config.json and the weights (the compute parameters, fp32 or the 16-bit copy
// widened). The same files, byte for byte, as save_hf_checkpoint of the gathered whole model. When
// rank 0's write fails it still gathers the remaining units (no rank is left in a collective),
// then throws the error naming the file.
void save_hf_checkpoint(EngineModel& model, const std::filesystem::path& folder,
                        SaveOptions options = {});

// All ranks: score.weight gathered first (K × C values kept), then the body as above; rank 0
// writes the GPT2ForSequenceClassification folder save_classifier_checkpoint writes.
void save_classifier_checkpoint(EngineClassifier& model, const std::filesystem::path& folder);

}  // namespace zero::gpt2
