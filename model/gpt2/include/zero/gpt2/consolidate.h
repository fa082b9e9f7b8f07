// A resumable ZeRO checkpoint turned into a Hugging Face model (DeepSpeed's zero_to_fp32.py),
// without the world that wrote it: `zero checkpoint consolidate` and `zero.checkpoint.consolidate`.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace zero::gpt2 {

struct ConsolidateSummary {
  std::filesystem::path checkpoint;  // the checkpoint-N folder read
  // out/model.safetensors, or out/model.safetensors.index.json where the weights are sharded
  std::filesystem::path model;
  bool classifier = false;          // a ...ForSequenceClassification (else a causal LM)
  std::string architecture;         // config.json's architectures[0]: the family's (family.h)
  std::int64_t global_steps = 0;    // the step whose fp32 master weights were written
  std::size_t num_files = 0;        // shard files read
  int world_size = 0;               // the world that wrote them
  std::vector<std::string> copied;  // tokenizer files copied beside the model
};

// Writes out/model.safetensors + config.json (and the tokenizer files the checkpoint holds) from
// `given` (a checkpoint-N folder, or an output_dir: its `latest`, else its newest checkpoint).
// Streams: each unit is read from the shard files (only its pieces) and written before the next,
// so memory is the largest unit plus the writer's buffers, whatever the model's size. Every unit
// is checked against config.json's model before anything is written; throws zero::Error naming
// what is missing or inconsistent.
ConsolidateSummary consolidate_checkpoint(const std::filesystem::path& given,
                                          const std::filesystem::path& out);

}  // namespace zero::gpt2
