// The DeepSpeed config and the engine's options of a run (internal to zero::train), resolved from
// the arguments beside the config precedence rule (zero/train/config_precedence.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "zero/config/ds_config.h"
#include "zero/engine/from_config.h"
#include "zero/train/arguments.h"
#include "zero/train/config_precedence.h"

namespace zero::train::detail {

// `deepspeed`'s config with "auto" filled from the arguments as Hugging Face's Trainer fills it,
// under the config precedence rule, and the engine's options from it. `total_steps` fills the
// scheduler's "auto" lengths (none: a length the file writes is kept unchecked), `hidden_size` the
// "auto" bucket sizes and thresholds (none: such an "auto" is an error). Throws InputError naming
// the source. make_run_config resolves a run's through it.
struct EngineSetup {
  config::ConfigResult deepspeed;
  EngineOptionsResult engine;
};
EngineSetup resolve_engine(const TrainingArguments& arguments, const DeepSpeedText& deepspeed,
                           int world, std::optional<std::int64_t> total_steps,
                           std::optional<std::int64_t> hidden_size);

// --report_to tensorboard (or all): the folder Hugging Face's TensorBoardCallback writes to
// (--logging_dir, default output_dir/runs/<Mon>DD_HH-MM-SS_<host>); "" for --report_to none. The
// config's tensorboard section is DeepSpeed's monitor, apart from it (zero/train/monitors.h).
std::string report_to_folder(const TrainingArguments& arguments);

}  // namespace zero::train::detail
