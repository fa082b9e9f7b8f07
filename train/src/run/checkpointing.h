// The trainer's resumable checkpoints (internal to zero::train): checkpoint-N = Hugging Face's
// files (config.json, model.safetensors, tokenizer files, trainer_state.json) + the engine's
// shards and index (zero/checkpoint/zero_checkpoint.h) + zero_trainer_state.json (where the
// data and the logs are), written crash-safely; and the resume from one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "kind/prepared.h"
#include "prepare/resume_folder.h"
#include "task/trainer_progress.h"
#include "zero/checkpoint/zero_checkpoint.h"
#include "zero/comm/communicator.h"
#include "zero/engine/engine.h"
#include "zero/gpt2/config.h"
#include "zero/train/arguments.h"

namespace zero::train::detail {

// The shape of the run a checkpoint continues: a resume must keep the global batch, the block
// size and the task (else "the same run" means nothing); the world size, per-device batch,
// accumulation, stage and precision may change.
struct RunShape {
  std::string task;
  std::int64_t train_batch_size = 0;  // per-device × world × accumulation
  std::int64_t per_device_train_batch_size = 0;
  std::int64_t gradient_accumulation_steps = 1;
  int world_size = 1;
  std::int64_t block_size = 0;
  std::uint64_t seed = 0;
  std::size_t train_blocks = 0;
};

// How a checkpoint is saved and rotated: --save_only_model leaves the engine's shards out (the
// checkpoint holds the model files and can't be resumed); rotation by save_total_limit keeps
// best_checkpoint (best_model.h) when there is one.
struct SaveOptions {
  std::int64_t save_total_limit = -1;
  bool model_only = false;
  std::string best_checkpoint;
};

// Saves output_dir/checkpoint-<step> (all ranks): `write_hf_files(staging)` (a collective: it
// gathers the model; rank 0 writes), the engine's shards, zero_trainer_state.json; commits
// (fsync, rename, `latest`), then rotates. Returns the folder.
std::filesystem::path save_checkpoint(
    Communicator& communicator, Engine& engine, const std::filesystem::path& output_dir,
    std::int64_t step, const SaveOptions& options, const RunShape& shape,
    const TrainerProgress& progress,
    const std::function<void(const std::filesystem::path&)>& write_hf_files);

// The run's shape from its arguments and what prepare() resolved.
RunShape run_shape(const TrainingArguments& arguments, const Prepared& prepared, int world);

// What a resume restores beside the engine.
struct Resumed {
  std::filesystem::path folder;
  checkpoint::CheckpointIndex index;
  TrainerProgress progress;
  RunShape written;                // the run that wrote it
  nlohmann::json log_history;      // trainer_state.json's
  nlohmann::json best;             // trainer_state.json's best_metric, best_model_checkpoint, ...
  std::vector<std::string> notes;  // what changed (world, stage, precision), for the log
};

// Before anything is written (every rank): `folder` is complete (index, every shard file
// present with its size) and was written for this model (config.json's shape against
// `model_config`) and this run's shape; reads the trainer state and the log history. Throws
// InputError naming the mismatch or the missing or truncated file, or a --save_only_model
// checkpoint (it has no optimizer state to continue from).
Resumed check_resume(const std::filesystem::path& folder, const gpt2::GPT2Config& model_config,
                     const RunShape& shape);
// Loads the shards into the engine (all ranks; checksums of the files this rank reads) and notes
// what changed (world, stage, precision). Throws zero::Error naming a bad file.
void load_resume(Resumed& resumed, Engine& engine);

}  // namespace zero::train::detail
