// What Hugging Face's process flags ask of `zero train` before its communicator starts
// (--local_rank, --ddp_backend, --ddp_timeout, --log_level, --log_level_replica), and the flags
// that stand for another one (--dataloader_num_workers for --preprocessing_num_workers).
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "zero/train/arguments.h"

namespace zero::train {

struct ProcessSettings {
  // Variables to set before the communicator and the first log line: LOCAL_RANK (from
  // --local_rank), ZERO_COMM_BACKEND (--ddp_backend), ZERO_LOG_LEVEL and ZERO_LOG_ALL_RANKS
  // (--log_level on rank 0, --log_level_replica on the others).
  std::map<std::string, std::string> environment;
  // The watchdog timeout of one collective: --ddp_timeout, unless ZERO_COMM_TIMEOUT_S is set.
  std::optional<std::chrono::milliseconds> timeout;
  std::vector<std::string> notes;  // start-log lines naming what the flags set
};

// The settings for a process of launch rank `rank` with `environment`. Throws InputError when a
// given flag contradicts its variable in the environment (--local_rank 1 with LOCAL_RANK=0,
// --ddp_backend gloo with ZERO_COMM_BACKEND=mpi), naming both.
ProcessSettings process_settings(const TrainingArguments& arguments,
                                 const std::map<std::string, std::string>& environment, int rank);

// Fills the fields another flag stands for when that flag was given and theirs was not:
// --dataloader_num_workers N is --preprocessing_num_workers N (zero's data workers are its
// tokenizer threads). Returns a note for each.
std::vector<std::string> apply_flag_equivalents(TrainingArguments& arguments);

// `accelerate launch --no_python zero train ...`: the variables accelerate sets for its launch
// config become the matching flags, counted as given: ACCELERATE_MIXED_PRECISION (fp16, bf16, no)
// as --fp16/--bf16, ACCELERATE_DEEPSPEED_CONFIG_FILE as --deepspeed,
// ACCELERATE_GRADIENT_ACCUMULATION_STEPS, ACCELERATE_GRADIENT_CLIPPING as
// --gradient_accumulation_steps and --max_grad_norm, ACCELERATE_USE_CPU as --use_cpu. A flag
// given with another value is an InputError naming both, as are fp8 and accelerate's DeepSpeed
// plugin without a config file (ACCELERATE_DEEPSPEED_ZERO_STAGE: give --deepspeed FILE).
// Returns a start-log line for each value taken.
std::vector<std::string> apply_accelerate_environment(
    TrainingArguments& arguments, const std::map<std::string, std::string>& environment);

}  // namespace zero::train
