// The model's config as the flags give it, reading no data (internal to zero::train): what
// make_run_config takes the hidden size from and what the planner plans.
#pragma once

#include "zero/gpt2/config.h"
#include "zero/train/arguments.h"

namespace zero::train::detail {

// --model_name_or_path's config.json (no weights read), --config_name, or else `scratch` (a model
// from scratch: GPT-2 124M's shape, sized to the tokenizer when it is known); then
// --config_overrides (refused with --model_name_or_path, as run_clm); validated. Throws InputError
// naming the flag.
gpt2::GPT2Config model_config_from_flags(const TrainingArguments& arguments,
                                         const gpt2::GPT2Config& scratch = {});

}  // namespace zero::train::detail
