// "auto" resolution and the section readers of a DeepSpeed config (private to libzero).
#pragma once

#include <cstdint>

#include "json_reader.h"
#include "zero/config/ds_config.h"

namespace zero::config::detail {

// Replaces each "auto" that a trainer value fills (Hugging Face's table: batch sizes, clipping,
// optimizer and scheduler params, fp16/bf16, hidden-size based bucket sizes) in `root`, and
// records an error for each concrete value that contradicts a flag given explicitly.
// "auto" left behind is reported by the section readers.
void fill_auto(Json& root, const TrainerValues& trainer, std::int64_t world_size,
               Diagnostics& diagnostics);

// Section readers: each marks its key known in `top` and reads the section into `config`.
void read_zero_optimization(ObjectReader& top, Diagnostics& diagnostics,
                            ZeroOptimizationConfig& zero);
void read_precision(ObjectReader& top, Diagnostics& diagnostics, Fp16Config& fp16,
                    Bf16Config& bf16);
void read_optimizer(ObjectReader& top, Diagnostics& diagnostics, OptimizerConfig& optimizer);
// `optimizer` (already read): WarmupLR without warmup_max_lr warms up to its lr, as DeepSpeed.
void read_scheduler(ObjectReader& top, Diagnostics& diagnostics, const OptimizerConfig& optimizer,
                    SchedulerConfig& scheduler);
void read_aio(ObjectReader& top, Diagnostics& diagnostics, AioConfig& aio);
void read_misc_sections(ObjectReader& top, Diagnostics& diagnostics, DeepSpeedConfig& config);

// DeepSpeed's batch rule (_set_batch_related_parameters, then _batch_assertion) for
// `config.world_size`: derives the missing members of the batch triple or reports why it cannot.
void resolve_batch(ObjectReader& top, Diagnostics& diagnostics, DeepSpeedConfig& config);

}  // namespace zero::config::detail
