// EngineOptions: what the ZeRO engine is told to do, field for field with DeepSpeed's JSON keys.
#pragma once

#include <cstddef>
#include <cstdint>

#include "zero/config/ds_config.h"
#include "zero/core/dtype.h"

namespace zero {

// "fp16": {...}: the dynamic loss scaler (deepspeed/runtime/fp16/loss_scaler.py).
struct LossScalerOptions {
  bool enabled = false;          // fp16.enabled
  double loss_scale = 0.0;       // 0: dynamic; otherwise a static scale
  int initial_scale_power = 16;  // initial dynamic scale 2^power
  int loss_scale_window = 1000;  // steps without overflow before the scale grows
  int hysteresis = 2;            // overflows tolerated before the scale shrinks
  bool consecutive_hysteresis = false;
  double min_loss_scale = 1.0;
  bool raise_error_at_min_scale = true;  // DeepSpeed errors when overflowing at the minimum
};

// The ZeRO engine's settings ("zero_optimization" and the top-level training keys). Sizes are
// in elements, as in DeepSpeed.
struct EngineOptions {
  int stage = 0;  // zero_optimization.stage: 0..3
  int gradient_accumulation_steps = 1;
  std::size_t reduce_bucket_size = 500'000'000;     // elements reduced per collective
  std::size_t allgather_bucket_size = 500'000'000;  // elements gathered per collective (1, 2)
  bool overlap_comm = true;          // collectives run on the comm stream while compute goes on
  bool contiguous_gradients = true;  // gradients are copied into a contiguous bucket
  bool reduce_scatter = true;        // false: all-reduce then keep the own shard (stages 1, 2)
  std::size_t prefetch_bucket_size = 50'000'000;      // stage3_prefetch_bucket_size
  std::size_t max_live_parameters = 1'000'000'000;    // stage3_max_live_parameters
  std::size_t param_persistence_threshold = 100'000;  // stage3_param_persistence_threshold
  double gradient_clipping = 0.0;                     // global norm; 0 disables
  bool prescale_gradients = false;
  double gradient_predivide_factor = 1.0;
  DType compute_dtype = DType::kFloat32;  // fp32 only on the CPU engine for now
  LossScalerOptions fp16;
  // "optimizer" and "scheduler" as the DeepSpeed config holds them. Unlike a config without an
  // "optimizer" section (type kNone), the engine's default is AdamW (lr 1e-3, betas 0.9/0.999,
  // eps 1e-8, no weight decay); the default scheduler is none (the optimizer's lr throughout).
  config::OptimizerConfig optimizer{.type = config::OptimizerType::kAdamW};
  config::SchedulerConfig scheduler;
  // Not DeepSpeed keys. Shards are padded to world_size × alignment_elements (64-byte shards).
  std::size_t alignment_elements = 16;
};

// Throws zero::Error naming the field when an option is out of range.
void validate(const EngineOptions& options);

}  // namespace zero
