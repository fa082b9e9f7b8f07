// The DeepSpeed config and the engine's options of a run (internal to zero::train), resolved from
// the arguments beside the config precedence rule (zero/train/config_precedence.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "zero/config/ds_config.h"
#include "zero/engine/from_config.h"
#include "zero/train/arguments.h"

namespace zero::train::detail {

// The DeepSpeed config with "auto" filled from the arguments as Hugging Face's Trainer fills it
// (`json_text` when not empty, else --deepspeed, else stage 0 with the flags' AdamW), and the
// engine's options from it. `hidden_size` fills the "auto" bucket sizes and thresholds (none:
// such an "auto" is an error). Throws InputError naming the source. prepare() and the planner
// (plan.cc) both resolve through it.
struct EngineSetup {
  config::ConfigResult deepspeed;
  EngineOptionsResult engine;
};
EngineSetup resolve_engine(const TrainingArguments& arguments, int world, std::int64_t total_steps,
                           std::optional<std::int64_t> hidden_size,
                           const std::string& json_text = {});

}  // namespace zero::train::detail
