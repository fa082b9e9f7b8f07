// The bridge from a resolved DeepSpeed config to the engine's options.
#pragma once

#include <string>
#include <vector>

#include "zero/config/ds_config.h"
#include "zero/engine/options.h"

namespace zero {

struct EngineOptionsResult {
  EngineOptions options;
  std::vector<std::string> warnings;  // settings accepted but without effect on this build
};

// Maps `config` (already resolved: batch triple, "auto", aliases, defaults) onto EngineOptions.
// The optimizer and scheduler sections are copied as they are. `default_optimizer` is used when
// the config has no "optimizer" section (the trainer's own optimizer, as Hugging Face supplies
// one; the default is EngineOptions' AdamW). fp16, bf16 and offload to "cpu" or "nvme" map onto
// the options as they are (state_policy() places each state; validate() checks the
// combinations). Settings this engine cannot honour are errors that name the JSON path
// (`optimizer.params.eps_inside_sqrt`, no optimizer at all); settings accepted without effect
// are `warnings` (offload_param below stage 3, a communication_data_type other than the
// gradients' own).
EngineOptionsResult engine_options_from_config(
    const config::DeepSpeedConfig& config,
    const config::OptimizerConfig& default_optimizer = EngineOptions{}.optimizer);

}  // namespace zero
