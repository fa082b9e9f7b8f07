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
// one; the default is EngineOptions' AdamW). Settings this engine cannot honour are errors that
// name the JSON path (fp16/bf16 compute on the CPU engine, NVMe offload, Lamb's
// eps_inside_sqrt); offload to "cpu" on a CPU build is accepted with a warning, since the state
// already lives in host memory there.
EngineOptionsResult engine_options_from_config(
    const config::DeepSpeedConfig& config,
    const config::OptimizerConfig& default_optimizer = EngineOptions{}.optimizer);

}  // namespace zero
