// The one rule between the command line and a DeepSpeed config (issue 23), for `zero train`,
// `zero estimate`, `zero config` and --dry_run alike:
//   - a value written in the config wins over a flag that was not given (the flag's field takes
//     the config's value, and the start log says so);
//   - a flag that was given and contradicts a value written in the config is an error naming
//     both;
//   - "auto" takes the flag's value: the one given, else Hugging Face's default (as HF fills it).
// TrainingArguments::given_flags says which flags were given; unset, every value counts as given
// (the Hugging Face Trainer's rule, kept for library callers).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zero/config/ds_config.h"
#include "zero/train/arguments.h"

namespace zero::train {

// The values that fill and check the config's keys under the rule: a given flag's value; for a
// flag not given, nothing where the config writes a concrete value at its key (the config
// wins), else Hugging Face's default (TrainingArguments' member initialiser). total_steps and
// hidden_size are passed through (empty: not known); total_steps yields to a concrete
// scheduler total_num_steps unless --max_steps was given.
config::TrainerValues trainer_values_by_precedence(const TrainingArguments& arguments,
                                                   std::string_view json_text,
                                                   std::int64_t world_size,
                                                   std::optional<std::int64_t> total_steps,
                                                   std::optional<std::int64_t> hidden_size);

// A run's DeepSpeed config as text, read once where a command starts: --deepspeed's file with
// the batch from the flags when it writes none (with_batch_from_flags), or text the caller gives
// (`zero estimate`'s flags, the Python module), or with neither stage 0 with the batch, clipping
// and precision keys "auto". `source` names it in resolve_config's errors, `what` in the
// trainer's ("--deepspeed ds.json", "the DeepSpeed config", "the default config").
struct DeepSpeedText {
  std::string text;
  std::string source;
  std::string what;
};
// Throws InputError naming --deepspeed when its file cannot be read.
DeepSpeedText deepspeed_text_of(const TrainingArguments& arguments,
                                const std::string& json_text = {});

// Resolves arguments.deepspeed's config under the rule and sets each field whose flag was not
// given to the config's value (the batch triple as DeepSpeed derives it for `world_size`).
// Returns one line per value taken from the file ("--per_device_train_batch_size 3
// (train_micro_batch_size_per_gpu in ds.json)"). Throws InputError for a missing or invalid
// file and for a given flag that contradicts it. Without --deepspeed it does nothing.
std::vector<std::string> apply_config_precedence(TrainingArguments& arguments,
                                                 std::int64_t world_size);
// The same with the file's text already read (deepspeed_text_of).
std::vector<std::string> apply_config_precedence(TrainingArguments& arguments,
                                                 const DeepSpeedText& deepspeed,
                                                 std::int64_t world_size);

// `json_text` with "train_micro_batch_size_per_gpu": "auto" added when it writes none of
// train_batch_size, train_micro_batch_size_per_gpu and gradient_accumulation_steps: the batch
// then comes from --per_device_train_batch_size (given or Hugging Face's default), as the HF
// Trainer hands it to DeepSpeed. Otherwise (and for text that is no JSON object) unchanged.
std::string with_batch_from_flags(const std::string& json_text);

// The file's text; throws InputError naming --deepspeed when it cannot be read.
std::string read_deepspeed_file(const std::string& path);

}  // namespace zero::train
