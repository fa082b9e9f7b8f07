// A run's configuration, resolved once where the run starts (`zero train`, `zero estimate`, or
// train() for a C++ caller): the arguments under the config precedence rule, the DeepSpeed config
// read once and resolved with every "auto" filled, and the engine's options from it. Immutable:
// prepare(), the memory planner and --auto_find_batch_size take it, and the batch search varies
// only the micro-batch (with_micro_batch).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "zero/config/ds_config.h"
#include "zero/core/dtype.h"
#include "zero/engine/from_config.h"
#include "zero/train/arguments.h"
#include "zero/train/config_precedence.h"

namespace zero::train {

struct RunConfig {
  TrainingArguments arguments;  // a flag not given took the DeepSpeed file's value
  int world_size = 1;           // the ranks it was resolved for
  // One line per value a flag not given took from the file ("--per_device_train_batch_size 3
  // (train_micro_batch_size_per_gpu in ds.json)"), for the start log.
  std::vector<std::string> from_file;
  DeepSpeedText deepspeed_text;             // what was resolved, read once
  std::optional<std::int64_t> hidden_size;  // the model's n_embd: the "auto" bucket sizes
  config::ConfigResult deepspeed;           // "auto" filled, the batch rule applied for world_size
  EngineOptionsResult engine;               // the engine's options from it
};

// The run `arguments` describe at `world_size` ranks: the config precedence rule applied (only
// with --deepspeed's file), the arguments and the rules of --task's flags checked, the model's
// config read from the flags for its hidden size (--model_name_or_path's config.json, no weights;
// --config_name; or GPT-2's shape; then --config_overrides), and `deepspeed_json` when given, else
// --deepspeed's file, else the default config resolved. `model_from_flags` false: the model is
// parameter counts (`zero estimate --params`), with no hidden size. The scheduler's "auto" lengths
// take --max_steps, else 1 (what the planner plans), and prepare() fills them from the steps it
// counts in the data, as Hugging Face finalizes its DeepSpeed config once it knows them. Reads no
// data; throws InputError naming the flag or the config's problem (a broken JSON file included).
RunConfig make_run_config(TrainingArguments arguments, int world_size,
                          const std::string& deepspeed_json = {}, bool model_from_flags = true);

// The same run at per-device micro-batch `micro_batch`: the arguments' and the resolved config's
// batch (train_micro_batch_size_per_gpu, train_batch_size = micro x accumulation x world), as
// DeepSpeed's batch rule derives them when the config leaves the micro-batch "auto".
RunConfig with_micro_batch(RunConfig run, std::int64_t micro_batch);

// The dtype of the final model's weights, as Hugging Face's Trainer saves them: under a DeepSpeed
// config (--deepspeed, or one given to the library) with bf16 or fp16 training, the module's
// 16-bit weights (DeepSpeed casts the module to 16 bits and keeps fp32 masters in its optimizer;
// accelerate's get_state_dict returns the module's state_dict at stages 0-2 and, at stage 3,
// _zero3_consolidated_16bit_state_dict when stage3_gather_16bit_weights_on_model_save is true),
// config.json's torch_dtype bfloat16/float16. fp32 otherwise: --bf16/--fp16 without DeepSpeed
// are autocast over fp32 parameters; at stage 3 without the gather flag Trainer writes no weights
// but a DeepSpeed checkpoint, whose zero_to_fp32.py gives fp32. Checkpoints keep fp32 (exact).
DType final_model_dtype(const RunConfig& run);

}  // namespace zero::train
