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

}  // namespace zero::train
